package pipeline

import (
	"encoding/json"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/contract/contracttest"
)

// flightOutbox returns the flight-state and msg rows of one flight.
func (h *harness) flightOutbox(flid int64) (states, events []outboxRow) {
	h.t.Helper()
	key := strconv.FormatInt(flid, 10)
	return h.outbox(`target='flight-state' AND pkey=$1`, key), h.outbox(`target='msg' AND pkey=$1`, key)
}

// TestVersion_R_C3_INV13_OneBumpPerEffectiveChange_INV20b: each effective
// change bumps state_version exactly once with one flight-state and one msg
// row; the same content again (new SEQN) bumps nothing, emits nothing and
// needs no projection.
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
// Validation 001§6 INV-20b/CLM-3 "失败重处理、重复发现".
func TestVersion_R_C3_INV13_OneBumpPerEffectiveChange_INV20b(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	h.run(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))
	h.run(3, flopMsg(3, "STND", flopRec(15, "<STND>S1</STND>")))   // same content, new SEQN
	h.run(4, flopMsg(4, "STND", flopRec(15, "<STND> S1 </STND>"))) // same code
	h.run(5, flopMsg(5, "TOBT", flopRec(15, "")))                  // element absent
	h.run(6, schd(6, "DNLD", fltr(15, day23, "<STND>S1</STND>")))  // snapshot equal to the state
	h.run(7, flopMsg(7, "STND", flopRec(15, "<STND>S2</STND>")))

	f := h.flight(15)
	require.Equal(t, int64(3), f.Version)
	require.Equal(t, int64(7), f.LastMsgID)
	require.Equal(t, "S2", f.Doc["STND"])
	for _, id := range []int64{3, 4, 5, 6} {
		r := h.proc(id)
		require.Equal(t, StateSucceeded, r.State, "message %d: %s", id, r.Reason)
		require.Empty(t, h.pending(id))
		require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE msg_id=$1 AND target <> 'mailbox'`, id), "message %d", id)
	}
	require.Contains(t, h.proc(3).Reason, "0 changed, 1 unchanged")

	states, events := h.flightOutbox(15)
	require.Len(t, states, 3)
	require.Len(t, events, 3)
	for i, v := range []int64{1, 2, 3} {
		require.Equal(t, strconv.FormatInt(v, 10), states[i].Headers["msgx-version"])
		require.Equal(t, "flight-15-v"+strconv.FormatInt(v, 10), events[i].Headers["msgx-event-id"])
	}
	require.Equal(t, []int64{1, 2, 7}, []int64{*states[0].MsgID, *states[1].MsgID, *states[2].MsgID})
	schdRows := h.outbox(`target='schd' AND pkey='15'`)
	require.Len(t, schdRows, 3, "one schd row per version")
	for i := range schdRows {
		var fs FlightState
		require.NoError(t, json.Unmarshal(states[i].Payload, &fs))
		var st contract.State
		require.NoError(t, json.Unmarshal(schdRows[i].Payload, &st))
		require.Equal(t, fs.Version, st.StateVersion)
		require.Equal(t, fs.Doc, st.Flight, "schd carries the state the projection gets")
		require.Equal(t, strconv.FormatInt(fs.Version, 10), schdRows[i].Headers[contract.HeaderStateVersion])
	}
}

// TestEvents_R_C3_R_I3_DocumentedOutboxJSON pins the flight-state value
// (schema 1), the msg event and the schd state (schema_version 2, stable
// event_id, key FLID, ISO times beside the SIS ones) and their headers, and
// holds every msg and schd row to the published consumer contract.
func TestEvents_R_C3_R_I3_DocumentedOutboxJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23, "<RENO>B1</RENO>")))
	h.clk.Advance(90 * time.Second)
	h.run(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))

	states, events := h.flightOutbox(15)
	require.Len(t, states, 2)
	require.Len(t, events, 2)

	var st map[string]any
	require.NoError(t, json.Unmarshal(states[1].Payload, &st))
	require.Equal(t, map[string]any{
		"schema": 1.0, "flid": 15.0, "version": 2.0, "state": "ACTIVE", "operation_day": "2021-01-23", "msg_id": 2.0,
		"doc": map[string]any{
			"FLID": "15", "ALCD": "YG", "FLNO": "YG9015", "MVIN": "A", "SODT": day23, "FLTY": "W", "FLIN": "D",
			"ACFT": "733", "RENO": "B1", "STND": "S1", "RUNSTATE": "SCHEDULED",
			"VERBATIM": map[string]any{"FFID": "YG-YG9015-A-23JAN210535-D"}, // the FLOP record's FFID (R-C1)
		},
	}, st)
	require.Equal(t, "15", states[1].Pkey)
	require.Equal(t, map[string]string{"msgx-version": "2", "msgx-msg-id": "2"}, states[1].Headers)

	var ev map[string]any
	require.NoError(t, json.Unmarshal(events[1].Payload, &ev))
	require.Equal(t, 2.0, ev["schema_version"])
	require.Equal(t, "flight-15-v2", ev["event_id"])
	require.Equal(t, EventUpdated, ev["event_type"])
	require.Equal(t, 15.0, ev["flid"])
	require.Equal(t, 2.0, ev["state_version"])
	require.Equal(t, "2021-01-23", ev["operation_day"])
	require.Equal(t, []any{"STND", "VERBATIM"}, ev["changed"])
	require.Equal(t, map[string]any{"msg_id": 2.0, "type": "FLOP", "subtype": "STND", "sender": "AODB", "seqn": "2"}, ev["source"])
	require.Equal(t, t0.Add(90*time.Second).Format(time.RFC3339Nano), ev["occurred_at"])
	require.Equal(t, st["doc"], ev["flight"])
	require.Equal(t, map[string]any{"/SODT": "2021-01-23T05:35:00+08:00"}, ev["times"], "SODT in operation-day.zone")
	require.Equal(t, "15", events[1].Pkey)
	require.Equal(t, map[string]string{
		"msgx-event-id": "flight-15-v2", "msgx-event-type": EventUpdated, "msgx-schema-version": "2",
		"msgx-state-version": "2", "msgx-msg-id": "2", "content-type": "application/json",
		"ce_specversion": "1.0", "ce_id": "flight-15-v2", "ce_source": "/msgexchange/flight-events",
		"ce_type": "msgexchange.flight.updated", "ce_time": "2021-01-23T00:01:30Z", "ce_subject": "15",
		"ce_dataschema": "urn:msgexchange:schema:msg:v2",
	}, events[1].Headers, "the msgx- headers and the CloudEvents binary-mode headers (R-N8)")

	schdRows := h.outbox(`target='schd' AND pkey='15'`)
	require.Len(t, schdRows, 2)
	var sc map[string]any
	require.NoError(t, json.Unmarshal(schdRows[1].Payload, &sc))
	for _, k := range []string{"schema_version", "event_id", "event_type", "flid", "state_version", "operation_day", "source", "occurred_at", "flight", "times"} {
		require.Equal(t, ev[k], sc[k], "schd %s is the msg event's", k)
	}
	require.NotContains(t, sc, "changed")
	schdHeaders := maps.Clone(events[1].Headers)
	schdHeaders["ce_source"] = "/msgexchange/flight-states" // one change, two events: not duplicates (R-N8)
	schdHeaders["ce_dataschema"] = "urn:msgexchange:schema:schd:v2"
	require.Equal(t, schdHeaders, schdRows[1].Headers)

	chk, err := contracttest.Load()
	require.NoError(t, err)
	chk = chk.InZone(h.e.opt.Zone)
	for _, r := range events {
		require.NoError(t, chk.CheckMsg(r.Pkey, r.Payload, r.Headers))
	}
	for _, r := range schdRows {
		require.NoError(t, chk.CheckSchd(r.Pkey, r.Payload, r.Headers))
	}

	var created Event
	require.NoError(t, json.Unmarshal(events[0].Payload, &created))
	require.Equal(t, EventCreated, created.EventType)
	require.Equal(t, "flight-15-v1", created.EventID)
	require.Equal(t, []string{"ACFT", "ALCD", "FLID", "FLIN", "FLNO", "FLTY", "MVIN", "RENO", "RUNSTATE", "SODT"}, created.Changed)
	require.Equal(t, "SCHD", created.Source.Type)
	require.Equal(t, "DNLD", created.Source.Subtype)
	require.Equal(t, int64(1), created.Source.MsgID)
}

// TestFDEL_R_C5_C25_DeletesWithCodeShareChildren: FDEL marks the flight
// DELETED with a version bump, a tombstone flight-state row (null payload,
// header msgx-version) and a deletion event, and deletes its ACTIVE
// code-share children (MAID = master) in the same transaction.
//
// Validation 001§6 INV-22 "子航班集合变化".
//
// Also names C-25, US-06.
func TestFDEL_R_C5_C25_DeletesWithCodeShareChildren(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD",
		fltr(15, day23),
		fltr(16, day23, "<CSOP>CA</CSOP><CSFT>YG9015</CSFT><MAID>15</MAID>"),
		fltr(17, day23, "<MAID>15</MAID>"),
		fltr(18, day23, "<MAID>15</MAID>"),
		fltr(19, day23),
		fltr(20, day23, "<MAID>20</MAID>"), // its own master: no self reference stored
	))
	require.Equal(t, int64(15), *h.flight(16).Master)
	require.Nil(t, h.flight(20).Master)
	h.run(2, flopMsg(2, "FDEL", flopRec(18, "<FDEL></FDEL>")))
	require.Equal(t, "DELETED", h.flight(18).State)
	require.Equal(t, int64(2), h.flight(18).Version)
	require.Equal(t, int64(2), h.flight(15).Version, "the master loses a child: its MAFL changes (INV-22)")

	h.run(3, flopMsg(3, "FDEL", flopRec(15, "<FDEL></FDEL>")))
	r := h.proc(3)
	require.Equal(t, StateApplied, r.State)
	require.Equal(t, "3 flights deleted", r.Reason)
	require.Equal(t, map[int64]int64{15: 3, 16: 2, 17: 2}, h.pending(3))
	for _, flid := range []int64{15, 16, 17} {
		f := h.flight(flid)
		want := int64(2)
		if flid == 15 {
			want = 3
		}
		require.Equal(t, "DELETED", f.State, "flight %d", flid)
		require.Equal(t, want, f.Version)
		require.Equal(t, int64(3), f.LastMsgID)
		require.Equal(t, "2021-01-23", f.OpDay)
		require.NotEmpty(t, f.Doc, "the last document is kept")

		states, events := h.flightOutbox(flid)
		require.Len(t, states, int(want))
		tomb := states[want-1]
		require.Nil(t, tomb.Payload, "tombstone: null value")
		require.Equal(t, map[string]string{"msgx-version": strconv.FormatInt(want, 10), "msgx-msg-id": "3"}, tomb.Headers)
		var ev Event
		require.NoError(t, json.Unmarshal(events[want-1].Payload, &ev))
		require.Equal(t, EventDeleted, ev.EventType)
		require.Equal(t, "flight-"+strconv.FormatInt(flid, 10)+"-v"+strconv.FormatInt(want, 10), ev.EventID)
		require.Nil(t, ev.Flight)
	}
	// The already deleted child and the unrelated flights are untouched.
	require.Equal(t, int64(2), h.flight(18).Version)
	require.Equal(t, int64(2), h.flight(18).LastMsgID)
	require.Equal(t, "ACTIVE", h.flight(19).State)
	require.Equal(t, int64(1), h.flight(19).Version)
	require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE msg_id=3 AND target='coutmsgs'`), "no EROR is sent back")

	h.ack(Ack{FLID: 15, Version: 3}, Ack{FLID: 16, Version: 2})
	require.Equal(t, StateApplied, h.state(3))
	h.ack(Ack{FLID: 17, Version: 2})
	require.Equal(t, StateSucceeded, h.state(3))
}
