package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSnapshot_R_M6_R_C6_AbsentFlightsOfEveryCoveredDayAreReadFromPostgreSQL:
// the stored flights a daily snapshot lacks are looked up on each
// operation day it covers, not only its first, and not on a day it does
// not cover (the rule is decide's
// TestSnapshot_R_M6_R_C6_TwoDaySnapshotDeletesAbsentFlightsOfEveryDay).
func TestSnapshot_R_M6_R_C6_AbsentFlightsOfEveryCoveredDayAreReadFromPostgreSQL(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(17, day24), fltr(18, day24), fltr(19, "25JAN210800")))
	h.run(2, schd(2, "DNLD", fltr(15, day23), fltr(17, day24)))
	r := h.proc(2)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, map[int64]int64{16: 2, 18: 2}, h.pending(2))
	for flid, state := range map[int64]string{15: "ACTIVE", 16: "DELETED", 17: "ACTIVE", 18: "DELETED", 19: "ACTIVE"} {
		require.Equal(t, state, h.flight(flid).State, "flight %d", flid)
	}
}
