package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSnapshot_R_C6_INV20b_InterruptedRunIsRedoneWhole: a daily snapshot
// of one step interrupted by an infrastructure error after some writes
// commits nothing, is FAILED, and its retry writes the package whole,
// each flight once (that a rerun changes nothing is decide's
// TestSnapshot_R_C6_INV20b_RerunChangesNothing).
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
// Validation 001§6 INV-20b/CLM-3 "失败重处理、重复发现".
func TestSnapshot_R_C6_INV20b_InterruptedRunIsRedoneWhole(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.exec(`ALTER TABLE projection_pending RENAME TO projection_pending_away`)
	h.insert(1, schd(1, "DNLD", fltr(15, day23, `<ERUT RTNO="1"><APCD>XIY</APCD></ERUT>`), fltr(16, day23, "<MAID>15</MAID>"), fltr(17, day24)))
	h.step()
	require.Equal(t, StateFailed, h.state(1))
	require.Zero(t, h.count(`SELECT count(*) FROM flight`))
	require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE target <> 'mailbox'`))
	h.exec(`ALTER TABLE projection_pending_away RENAME TO projection_pending`)
	h.clk.Advance(time.Second)
	h.drain()
	require.Equal(t, StateApplied, h.state(1))
	for _, flid := range []int64{15, 16, 17} {
		require.Equal(t, int64(1), h.flight(flid).Version)
	}
	require.Equal(t, 3, h.count(`SELECT count(*) FROM outbox WHERE target='flight-state'`))
	require.Equal(t, 3, h.count(`SELECT count(*) FROM outbox WHERE target='msg'`))
}

// TestSnapshot_R_H1_R_J4_PanicWhilePlanningIsRetriedOnTheWholePackage:
// making a snapshot's plan takes the records out of its decoded message
// (R-J4), so a step that panics once the plan is made — before the memo
// keeps it — must not leave that message for the retry: the retry decodes
// the text again and writes the whole package. With the taken message
// offered again, a package with RECS would be rejected for carrying no
// records, and one whose RECS is empty would finish as a snapshot of
// nothing.
func TestSnapshot_R_H1_R_J4_PanicWhilePlanningIsRetriedOnTheWholePackage(t *testing.T) {
	t.Parallel()
	for name, recs := range map[string]string{"RECS 3": "3", "RECS empty": ""} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.insert(1, schdRecs(1, "DNLD", recs, fltr(15, day23), fltr(16, day23), fltr(17, day23)))
			panics := 0
			ctx := context.WithValue(context.Background(), stageHookKey{}, stageHook(func(stage string, id int64) {
				if stage == "snapshot planned" && id == 1 && panics == 0 {
					panics++
					panic("boom after planning")
				}
			}))
			progressed, _, err := h.e.Step(ctx)
			require.NoError(t, err)
			require.True(t, progressed)
			require.Equal(t, 1, panics)
			r := h.proc(1)
			require.Equal(t, StateFailed, r.State)
			require.Contains(t, r.Reason, "boom after planning")

			h.clk.Advance(time.Second)
			for progressed := true; progressed; {
				progressed, _, err = h.e.Step(ctx)
				require.NoError(t, err)
			}
			r = h.proc(1)
			require.Equal(t, StateApplied, r.State, r.Reason)
			for _, flid := range []int64{15, 16, 17} {
				require.Equal(t, int64(1), h.flight(flid).Version, "flight %d written by the retry", flid)
			}
		})
	}
}
