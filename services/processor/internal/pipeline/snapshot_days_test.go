package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSnapshot_R_M6_R_C6_TwoDaySnapshotDeletesAbsentFlightsOfEveryDay: a
// daily snapshot that covers two operation days deletes the ACTIVE flights
// it does not carry on each of them — not only on its first day — and
// leaves a third day alone. Every other snapshot test covers one day, so
// a deletion limited to the first covered day would pass them all.
func TestSnapshot_R_M6_R_C6_TwoDaySnapshotDeletesAbsentFlightsOfEveryDay(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{0, 1} {
		name := "one step"
		if batch > 0 {
			name = "a batch per record"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) {
				if batch > 0 {
					o.SnapshotBatch = batch
				}
			})
			h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(17, day24), fltr(18, day24), fltr(19, "25JAN210800")))
			h.run(2, schd(2, "DNLD", fltr(15, day23), fltr(17, day24)))

			r := h.proc(2)
			require.Equal(t, StateApplied, r.State)
			require.Contains(t, r.Reason, "snapshot: 2 records, 0 changed, 2 deleted, 2 days")
			require.Equal(t, map[int64]int64{16: 2, 18: 2}, h.pending(2))
			for _, flid := range []int64{16, 18} {
				f := h.flight(flid)
				require.Equal(t, "DELETED", f.State, "flight %d of a covered day, absent from the snapshot", flid)
				require.Equal(t, int64(2), f.Version)
			}
			tombs := h.outbox(`target='flight-state' AND msg_id=2`)
			var keys []string
			for _, o := range tombs {
				require.Nil(t, o.Payload, "a deletion's flight-state record is a tombstone")
				keys = append(keys, o.Pkey)
			}
			require.ElementsMatch(t, []string{"16", "18"}, keys)
			for _, flid := range []int64{15, 17} {
				require.Equal(t, "ACTIVE", h.flight(flid).State)
				require.Equal(t, int64(1), h.flight(flid).Version, "flight %d is carried unchanged", flid)
			}
			require.Equal(t, "ACTIVE", h.flight(19).State, "an operation day the snapshot does not cover is left alone")
		})
	}
}
