package pipeline

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSnapshot_R_K4_DecodedAndValidatedOncePerMessage: a daily snapshot
// written in many steps is decoded once and validated once (one read of
// its stored operation days), however many steps it takes, so its cost is
// linear in its size. Counted, not timed: a package ten times larger takes
// ten times the steps and still one decode and one plan.
func TestSnapshot_R_K4_DecodedAndValidatedOncePerMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.SnapshotBatch = 5 })
	deleted := int64(0) // the second package drops the first one's flights
	for i, n := range []int64{20, 200} {
		id := int64(i + 1)
		decodes, plans := h.e.decodes.Load(), h.e.plans.Load()
		h.run(id, schd(id, "DNLD", fltrs(1000*id, 1000*id+n-1)...))
		r := h.proc(id)
		require.Equal(t, StateApplied, r.State, r.Reason)
		require.Contains(t, r.Reason, fmt.Sprintf("snapshot: %d records, %d changed, %d deleted, 1 days, %d batches", n, n, deleted, (n+deleted)/5),
			"the package took many steps")
		deleted = n
		require.EqualValues(t, 1, h.e.decodes.Load()-decodes, "%d flights: decoded once, not once per step", n)
		require.EqualValues(t, 1, h.e.plans.Load()-plans, "%d flights: validated once, not once per step", n)
	}
}

// TestSnapshot_R_K4_RecordsLimitIsMalformed: a message carrying more
// records than pipeline.max-records is DEAD(MALFORMED) with a reason naming
// the limit, nothing written; one at the limit is applied.
func TestSnapshot_R_K4_RecordsLimitIsMalformed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxRecords = 4 })
	h.run(1, schd(1, "DNLD", fltrs(20, 24)...))
	r := h.proc(1)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassMalformed, r.ErrorClass)
	require.Equal(t, "the message carries 5 records, more than pipeline.max-records (4)", r.Reason)
	require.Zero(t, h.count(`SELECT count(*) FROM flight`), "nothing written")

	h.run(2, schd(2, "DNLD", fltrs(20, 23)...))
	require.Equal(t, StateApplied, h.state(2), h.proc(2).Reason)
	require.Equal(t, 4, h.count(`SELECT count(*) FROM flight`))
}
