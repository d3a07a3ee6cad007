package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlop_R_C4_RejectedMessageRollsBackItsEarlierRecords: a FLOP refused
// for a bad value is DEAD(PROTOCOL) and PostgreSQL keeps nothing of it,
// also the valid record before the bad one, which the handler had already
// written into the message's transaction (which values are refused is
// decide's TestFlop_R_C4_BadValueIsDeadAndWritesNothing).
func TestFlop_R_C4_RejectedMessageRollsBackItsEarlierRecords(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
	before := h.snapshotTables()
	h.run(2, flopMsg(2, "DELY", flopRec(16, `<DELY CODE="RA">x</DELY>`), flopRec(15, `<DELY CODE="" STRT="23JAN210600" DURA="0010">x</DELY>`)))
	r := h.proc(2)
	require.Equal(t, StateDead, r.State, r.Reason)
	require.Equal(t, ClassProtocol, r.ErrorClass)
	require.Contains(t, r.Reason, "without CODE")
	require.Equal(t, before, h.snapshotTables(), "nothing of the message is written")
}
