package decide

import (
	"encoding/json"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/contract/contracttest"
	"msgexchange/services/internal/flightstate"
)

// outboxOf returns the outbox rows of target in the changes, in order.
func outboxOf(changes []*Change, target string) []OutboxRow {
	var out []OutboxRow
	for _, c := range changes {
		for _, o := range c.Outbox {
			if o.Target == target {
				out = append(out, o)
			}
		}
	}
	return out
}

// TestVersion_R_C3_INV13_OneBumpPerEffectiveChange_INV20b: each effective
// change bumps state_version exactly once with one flight-state, one msg
// and one schd row; the same content again (new SEQN) bumps nothing, emits
// nothing and needs no projection.
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
// Validation 001§6 INV-20b/CLM-3 "失败重处理、重复发现".
func TestVersion_R_C3_INV13_OneBumpPerEffectiveChange_INV20b(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	var changes []*Change
	changes = append(changes, r.run(1, schd(1, "DNLD", fltr(15, day23))).Changes...)
	changes = append(changes, r.run(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>"))).Changes...)
	for _, m := range []struct {
		id  int64
		raw string
	}{
		{3, flopMsg(3, "STND", flopRec(15, "<STND>S1</STND>"))},   // same content, new SEQN
		{4, flopMsg(4, "STND", flopRec(15, "<STND> S1 </STND>"))}, // same code
		{5, flopMsg(5, "TOBT", flopRec(15, ""))},                  // element absent
		{6, schd(6, "DNLD", fltr(15, day23, "<STND>S1</STND>"))},  // snapshot equal to the state
	} {
		v := r.run(m.id, m.raw)
		require.Equal(t, succeeded, v.State, "message %d: %s", m.id, v.Reason)
		require.Empty(t, v.Changes, "message %d: no version, no outbox row, no pending projection", m.id)
		if m.id == 3 {
			require.Contains(t, v.Reason, "0 changed, 1 unchanged")
		}
	}
	changes = append(changes, r.run(7, flopMsg(7, "STND", flopRec(15, "<STND>S2</STND>"))).Changes...)

	f := r.flight(15)
	require.Equal(t, int64(3), f.Version)
	require.Equal(t, "S2", f.Doc["STND"])
	require.Len(t, changes, 3)
	require.Equal(t, int64(7), changes[2].MsgID, "the last writer of the row")

	states, events, schdRows := outboxOf(changes, TargetFlightState), outboxOf(changes, TargetMsg), outboxOf(changes, TargetSchd)
	require.Len(t, states, 3)
	require.Len(t, events, 3)
	require.Len(t, schdRows, 3, "one schd row per version")
	for i, v := range []int64{1, 2, 3} {
		require.Equal(t, v, changes[i].Row.Version)
		require.Equal(t, strconv.FormatInt(v, 10), headersOf(t, states[i])["msgx-version"])
		require.Equal(t, "flight-15-v"+strconv.FormatInt(v, 10), headersOf(t, events[i])["msgx-event-id"])
	}
	require.Equal(t, []int64{1, 2, 7}, []int64{states[0].MsgID, states[1].MsgID, states[2].MsgID})
	for i := range schdRows {
		var fs flightstate.Value
		require.NoError(t, json.Unmarshal(states[i].Payload, &fs))
		var st contract.State
		require.NoError(t, json.Unmarshal(schdRows[i].Payload, &st))
		require.Equal(t, fs.Version, st.StateVersion)
		require.Equal(t, fs.Doc, st.Flight, "schd carries the state the projection gets")
		require.Equal(t, strconv.FormatInt(fs.Version, 10), headersOf(t, schdRows[i])[contract.HeaderStateVersion])
	}
}

// TestEvents_R_C3_R_I3_DocumentedOutboxJSON pins the flight-state value
// (schema 1), the msg event and the schd state (schema_version 2, stable
// event_id, key FLID, ISO times beside the SIS ones) and their headers, and
// holds every msg and schd row to the published consumer contract.
func TestEvents_R_C3_R_I3_DocumentedOutboxJSON(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	first := r.run(1, schd(1, "DNLD", fltr(15, day23, "<RENO>B1</RENO>")))
	second := r.run(90, flopMsg(90, "STND", flopRec(15, "<STND>S1</STND>")))
	changes := append(first.Changes, second.Changes...)

	states, events, schdRows := outboxOf(changes, TargetFlightState), outboxOf(changes, TargetMsg), outboxOf(changes, TargetSchd)
	require.Len(t, states, 2)
	require.Len(t, events, 2)
	require.Len(t, schdRows, 2)

	var st map[string]any
	require.NoError(t, json.Unmarshal(states[1].Payload, &st))
	require.Equal(t, map[string]any{
		"schema": 1.0, "flid": 15.0, "version": 2.0, "state": "ACTIVE", "operation_day": "2021-01-23", "msg_id": 90.0,
		"doc": map[string]any{
			"FLID": "15", "ALCD": "YG", "FLNO": "YG9015", "MVIN": "A", "SODT": day23, "FLTY": "W", "FLIN": "D",
			"ACFT": "733", "RENO": "B1", "STND": "S1", "RUNSTATE": "SCHEDULED",
			"VERBATIM": map[string]any{"FFID": "YG-YG9015-A-23JAN210535-D"}, // the FLOP record's FFID (R-C1)
		},
	}, st)
	require.Equal(t, "15", states[1].Pkey)
	require.Equal(t, map[string]string{"msgx-version": "2", "msgx-msg-id": "90"}, headersOf(t, states[1]))

	var ev map[string]any
	require.NoError(t, json.Unmarshal(events[1].Payload, &ev))
	require.Equal(t, 2.0, ev["schema_version"])
	require.Equal(t, "flight-15-v2", ev["event_id"])
	require.Equal(t, contract.EventUpdated, ev["event_type"])
	require.Equal(t, 15.0, ev["flid"])
	require.Equal(t, 2.0, ev["state_version"])
	require.Equal(t, "2021-01-23", ev["operation_day"])
	require.Equal(t, []any{"STND", "VERBATIM"}, ev["changed"])
	require.Equal(t, map[string]any{"msg_id": 90.0, "type": "FLOP", "subtype": "STND", "sender": "AODB", "seqn": "90"}, ev["source"])
	require.Equal(t, r.at(90).Format(time.RFC3339Nano), ev["occurred_at"], "the time the message is written")
	require.Equal(t, st["doc"], ev["flight"])
	require.Equal(t, map[string]any{"/SODT": "2021-01-23T05:35:00+08:00"}, ev["times"], "SODT in operation-day.zone")
	require.Equal(t, "15", events[1].Pkey)
	require.Equal(t, map[string]string{
		"msgx-event-id": "flight-15-v2", "msgx-event-type": contract.EventUpdated, "msgx-schema-version": "2",
		"msgx-state-version": "2", "msgx-msg-id": "90", "content-type": "application/json",
		"ce_specversion": "1.0", "ce_id": "flight-15-v2", "ce_source": "/msgexchange/flight-events",
		"ce_type": "msgexchange.flight.updated", "ce_time": "2021-01-23T00:01:30Z", "ce_subject": "15",
		"ce_dataschema": "urn:msgexchange:schema:msg:v2",
	}, headersOf(t, events[1]), "the msgx- headers and the CloudEvents binary-mode headers (R-N8)")

	var sc map[string]any
	require.NoError(t, json.Unmarshal(schdRows[1].Payload, &sc))
	for _, k := range []string{"schema_version", "event_id", "event_type", "flid", "state_version", "operation_day", "source", "occurred_at", "flight", "times"} {
		require.Equal(t, ev[k], sc[k], "schd %s is the msg event's", k)
	}
	require.NotContains(t, sc, "changed")
	schdHeaders := maps.Clone(headersOf(t, events[1]))
	schdHeaders["ce_source"] = "/msgexchange/flight-states" // one change, two events: not duplicates (R-N8)
	schdHeaders["ce_dataschema"] = "urn:msgexchange:schema:schd:v2"
	require.Equal(t, schdHeaders, headersOf(t, schdRows[1]))

	chk, err := contracttest.Load()
	require.NoError(t, err)
	chk = chk.InZone(r.od.Zone)
	for _, o := range events {
		require.NoError(t, chk.CheckMsg(o.Pkey, o.Payload, headersOf(t, o)))
	}
	for _, o := range schdRows {
		require.NoError(t, chk.CheckSchd(o.Pkey, o.Payload, headersOf(t, o)))
	}

	var created contract.Event
	require.NoError(t, json.Unmarshal(events[0].Payload, &created))
	require.Equal(t, contract.EventCreated, created.EventType)
	require.Equal(t, "flight-15-v1", created.EventID)
	require.Equal(t, []string{"ACFT", "ALCD", "FLID", "FLIN", "FLNO", "FLTY", "MVIN", "RENO", "RUNSTATE", "SODT"}, created.Changed)
	require.Equal(t, "SCHD", created.Source.Type)
	require.Equal(t, "DNLD", created.Source.Subtype)
	require.Equal(t, int64(1), created.Source.MsgID)
}

// TestFDEL_R_C5_C25_DeletesWithCodeShareChildren: FDEL marks the flight
// DELETED with a version bump, a tombstone flight-state row (null payload,
// header msgx-version) and a deletion event, and deletes its ACTIVE
// code-share children (MAID = master) in the same transaction; no EROR
// is sent back.
//
// Validation 001§6 INV-22 "子航班集合变化".
//
// Also names C-25, US-06.
func TestFDEL_R_C5_C25_DeletesWithCodeShareChildren(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD",
		fltr(15, day23),
		fltr(16, day23, "<CSOP>CA</CSOP><CSFT>YG9015</CSFT><MAID>15</MAID>"),
		fltr(17, day23, "<MAID>15</MAID>"),
		fltr(18, day23, "<MAID>15</MAID>"),
		fltr(19, day23),
		fltr(20, day23, "<MAID>20</MAID>"), // its own master: no self reference stored
	))
	require.Equal(t, int64(15), *r.flight(16).Master)
	require.Nil(t, r.flight(20).Master)
	r.run(2, flopMsg(2, "FDEL", flopRec(18, "<FDEL></FDEL>")))
	require.Equal(t, "DELETED", r.flight(18).State)
	require.Equal(t, int64(2), r.flight(18).Version)
	require.Equal(t, int64(2), r.flight(15).Version, "the master loses a child: its MAFL changes (INV-22)")
	before := r.flights()

	v := r.run(3, flopMsg(3, "FDEL", flopRec(15, "<FDEL></FDEL>")))
	require.Equal(t, applied, v.State)
	require.Equal(t, "3 flights deleted", v.Reason)
	require.Equal(t, map[int64]int64{15: 3, 16: 2, 17: 2}, v.versions(), "a pending projection per deleted flight")
	for _, c := range v.Changes {
		flid := c.Row.FLID
		want := int64(2)
		if flid == 15 {
			want = 3
		}
		f := r.flight(flid)
		require.Equal(t, "DELETED", f.State, "flight %d", flid)
		require.Equal(t, want, f.Version)
		require.Equal(t, int64(3), c.MsgID)
		require.Equal(t, "2021-01-23", f.OpDay.Format(time.DateOnly))
		require.NotEmpty(t, f.Doc, "the last document is kept")
		require.Nil(t, c.Canonical, "a deletion leaves the stored document as it is")

		require.Equal(t, []string{TargetFlightState, TargetMsg, TargetSchd}, []string{c.Outbox[0].Target, c.Outbox[1].Target, c.Outbox[2].Target})
		tomb := c.Outbox[0]
		require.Nil(t, tomb.Payload, "tombstone: null value")
		require.Equal(t, map[string]string{"msgx-version": strconv.FormatInt(want, 10), "msgx-msg-id": "3"}, headersOf(t, tomb))
		var ev contract.Event
		require.NoError(t, json.Unmarshal(c.Outbox[1].Payload, &ev))
		require.Equal(t, contract.EventDeleted, ev.EventType)
		require.Equal(t, "flight-"+strconv.FormatInt(flid, 10)+"-v"+strconv.FormatInt(want, 10), ev.EventID)
		require.Nil(t, ev.Flight)
		for _, o := range c.Outbox {
			require.NotEqual(t, "coutmsgs", o.Target, "no EROR is sent back")
		}
	}
	// The already deleted child and the unrelated flights are untouched.
	after := r.flights()
	require.Equal(t, before[18], after[18])
	require.Equal(t, before[19], after[19])
	require.Equal(t, "ACTIVE", r.flight(19).State)
	require.Equal(t, int64(1), r.flight(19).Version)
}
