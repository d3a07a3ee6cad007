package pipeline

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// flightOutbox returns the flight-state and msg rows of one flight.
func (h *harness) flightOutbox(flid int64) (states, events []outboxRow) {
	h.t.Helper()
	key := strconv.FormatInt(flid, 10)
	return h.outbox(`target='flight-state' AND pkey=$1`, key), h.outbox(`target='msg' AND pkey=$1`, key)
}

// TestFDEL_R_C5_C25_StoredDeletedWithTombstonesUntilAcked: an FDEL end to
// end against PostgreSQL (its rules are decide's
// TestFDEL_R_C5_C25_DeletesWithCodeShareChildren): the flight and its
// code-share child are stored DELETED by the message with the last
// document kept, each with a null flight-state row, a deletion event and
// a pending projection, nothing else is touched, and the message is
// APPLIED until every projection is acked.
func TestFDEL_R_C5_C25_StoredDeletedWithTombstonesUntilAcked(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>"), fltr(19, day23)))
	h.run(2, flopMsg(2, "FDEL", flopRec(15, "<FDEL></FDEL>")))
	r := h.proc(2)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "2 flights deleted", r.Reason)
	require.Equal(t, map[int64]int64{15: 2, 16: 2}, h.pending(2))
	for _, flid := range []int64{15, 16} {
		f := h.flight(flid)
		require.Equal(t, "DELETED", f.State, "flight %d", flid)
		require.Equal(t, int64(2), f.Version)
		require.Equal(t, int64(2), f.LastMsgID)
		require.Equal(t, "2021-01-23", f.OpDay)
		require.NotEmpty(t, f.Doc, "the last document is kept")

		states, events := h.flightOutbox(flid)
		require.Len(t, states, 2)
		require.Nil(t, states[1].Payload, "tombstone: null value")
		require.Equal(t, map[string]string{"msgx-version": "2", "msgx-msg-id": "2"}, states[1].Headers)
		require.Len(t, events, 2)
		var ev Event
		require.NoError(t, json.Unmarshal(events[1].Payload, &ev))
		require.Equal(t, EventDeleted, ev.EventType)
	}
	require.Equal(t, "ACTIVE", h.flight(19).State)
	require.Equal(t, int64(1), h.flight(19).Version)
	require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE msg_id=2 AND target='coutmsgs'`), "no EROR is sent back")

	h.ack(Ack{FLID: 15, Version: 2})
	require.Equal(t, StateApplied, h.state(2))
	h.ack(Ack{FLID: 16, Version: 2})
	require.Equal(t, StateSucceeded, h.state(2))
}
