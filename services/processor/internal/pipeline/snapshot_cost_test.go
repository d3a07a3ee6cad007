package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// TestSnapshot_R_L7_SnapshotLogKeptNinetyDays: the last step of every
// daily snapshot package writes its row of snapshot_log — days, records,
// changed, deleted, unchanged, batches, duration, outcome (SCHD_SNAP_LOG)
// — and the daily maintenance deletes the rows older than 90 days.
//
// Also names SCHD_SNAP_LOG.
func TestSnapshot_R_L7_SnapshotLogKeptNinetyDays(t *testing.T) {
	t.Parallel()
	h := newHarness(t, batchOf2)
	h.run(1, schd(1, "DNLD", fltrs(20, 24)...))
	h.clk.Advance(time.Hour)
	h.run(2, schd(2, "DNLD", fltrs(20, 23)...)) // unchanged but one, deleted

	type logRow struct {
		MsgID                                         int64
		Styp, Days, Outcome                           string
		Records, Changed, Deleted, Unchanged, Batches int
		Took                                          time.Duration
	}
	read := func() []logRow {
		rows, err := h.pool.Query(context.Background(), `
			SELECT msg_id, styp, array_to_string(days, ','), outcome, records, changed, deleted, unchanged, batches,
			       (extract(epoch FROM finished_at - started_at) * 1e9)::bigint
			FROM snapshot_log ORDER BY msg_id`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (logRow, error) {
			var l logRow
			var took int64
			err := r.Scan(&l.MsgID, &l.Styp, &l.Days, &l.Outcome, &l.Records, &l.Changed, &l.Deleted, &l.Unchanged, &l.Batches, &took)
			l.Took = time.Duration(took)
			return l, err
		})
		require.NoError(t, err)
		return out
	}
	require.Equal(t, []logRow{
		{MsgID: 1, Styp: "DNLD", Days: "2021-01-23", Outcome: "APPLIED", Records: 5, Changed: 5, Batches: 3},
		{MsgID: 2, Styp: "DNLD", Days: "2021-01-23", Outcome: "APPLIED", Records: 4, Unchanged: 4, Deleted: 1, Batches: 3},
	}, read(), "the fake clock stands still while a package runs: no duration")

	h.clk.Advance(SnapshotLogKeep - time.Hour - time.Minute) // 90 days after the first package less a minute
	res, err := h.e.RunMaintenance(context.Background(), h.clk.Now())
	require.NoError(t, err)
	require.Zero(t, res.Purge.SnapshotLogs)
	h.clk.Advance(2 * time.Minute)
	res, err = h.e.RunMaintenance(context.Background(), h.clk.Now())
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Purge.SnapshotLogs, "rows older than 90 days are deleted")
	require.Len(t, read(), 1, "the second package is younger")
}
