package pipeline

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// eventTypes lists the msg event types message id wrote for flid, in order.
func (h *harness) eventTypes(flid string, id int64) []string {
	h.t.Helper()
	out := []string{}
	for _, r := range h.outbox(`target='msg' AND pkey=$1 AND msg_id=$2`, flid, id) {
		var ev Event
		require.NoError(h.t, json.Unmarshal(r.Payload, &ev))
		out = append(out, ev.EventType)
	}
	return out
}

// TestSchd_R_C6_AddAndUpdUpsertWithoutDeleting: SCHD ADD and UPD
// (catalogue §3, "upsert without deleting") write each record as a
// snapshot record does — the record replaces its flight's document, so an
// optional element it does not carry is cleared (C-26), a new or deleted
// flight is created, an unchanged record bumps nothing (INV-13) — and
// delete no other flight of the day; a code-share child they add or move
// rewrites its master in the same transaction (INV-22).
func TestSchd_R_C6_AddAndUpdUpsertWithoutDeleting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23, "<TRML>T2</TRML><STND>504</STND>"), fltr(16, day23), fltr(17, day23)))
	h.run(2, flopMsg(2, "FDEL", flopRec(17, "<FDEL/>")))
	require.Equal(t, "DELETED", h.flight(17).State)

	// UPD: 15 replaced (STND cleared), 18 unknown so created; 16 untouched.
	h.run(3, schd(3, "UPD", fltr(15, day23, "<TRML>T3</TRML>"), fltr(18, day23)))
	r := h.proc(3)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "UPD: 2 records, 2 changed", r.Reason)
	f15 := h.flight(15)
	require.EqualValues(t, 2, f15.Version)
	require.Equal(t, "T3", f15.Doc["TRML"])
	require.NotContains(t, f15.Doc, "STND", "an optional element the record does not carry is cleared")
	require.Equal(t, []string{EventUpdated}, h.eventTypes("15", 3))
	require.Equal(t, []string{EventCreated}, h.eventTypes("18", 3))
	require.EqualValues(t, 1, h.flight(16).Version, "a flight the message does not carry is kept as it is")
	require.Equal(t, "ACTIVE", h.flight(16).State)

	// ADD: 17 (deleted) comes back, 15 unchanged bumps nothing, 19 joins
	// master 16, whose MAFL is rewritten by the same message.
	h.run(4, schd(4, "ADD", fltr(17, day23), fltr(15, day23, "<TRML>T3</TRML>"), fltr(19, day23, "<MAID>16</MAID>")))
	r = h.proc(4)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "ADD: 3 records, 2 changed", r.Reason, "records changed; the master follows")
	require.Equal(t, "ACTIVE", h.flight(17).State)
	require.EqualValues(t, 3, h.flight(17).Version)
	require.Equal(t, []string{EventCreated}, h.eventTypes("17", 4))
	require.EqualValues(t, 2, h.flight(15).Version, "an unchanged record bumps nothing")
	require.Empty(t, h.eventTypes("15", 4))
	f16 := h.flight(16)
	require.EqualValues(t, 2, f16.Version)
	require.Equal(t, []any{map[string]any{"FLID": "19", "FLNO": "YG9019"}}, f16.Doc["MAFL"])
	require.Equal(t, int64(4), f16.LastMsgID, "the master moved with the child, in the child's message")
	require.Equal(t, 5, h.count(`SELECT count(*) FROM flight WHERE state='ACTIVE'`), "ADD and UPD delete nothing")
}

// TestSchd_R_C6_INV19_AddUpdDelInvalidPackageWritesNothing: ADD, UPD and
// DEL validate the whole package before writing, like a snapshot: a RECS
// that does not match, a record without a required element (ADD, UPD) or
// without a readable FLID (DEL), a FLID twice or a flight moving to another
// operation day is DEAD(PROTOCOL) with nothing written.
func TestSchd_R_C6_INV19_AddUpdDelInvalidPackageWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
	h.ack(Ack{FLID: 15, Version: 1}, Ack{FLID: 16, Version: 1})
	before := h.snapshotTables()
	noACFT := "<FLTR><FLID>20</FLID><ALCD>YG</ALCD><FLNO>YG20</FLNO><MVIN>A</MVIN><SODT>" + day23 + "</SODT><FLTY>W</FLTY><FLIN>D</FLIN></FLTR>"
	cases := []struct {
		raw, reason string
	}{
		{schdRecs(2, "ADD", "3", fltr(20, day23)), `RECS "3"`},
		{schd(3, "ADD", fltr(20, day23), noACFT), "required element ACFT"},
		{schd(4, "UPD", fltr(20, day23), fltr(20, day23)), "FLID 20 twice"},
		{schd(5, "UPD", fltr(20, day23), fltr(15, day24)), "flight 15 would move"},
		{schd(6, "DEL", "<FLTR><FLID>15</FLID></FLTR>", "<FLTR><FLID>x1</FLID></FLTR>"), `FLID "x1" is not a positive integer`},
		{schd(7, "DEL", "<FLTR><FLID>15</FLID></FLTR>", "<FLTR><ALCD>YG</ALCD></FLTR>"), `FLID "" is not a positive integer`},
		{schd(8, "DEL", "<FLTR><FLID>15</FLID></FLTR>", "<FLTR><FLID>15</FLID></FLTR>"), "FLID 15 twice"},
		{schdRecs(9, "DEL", "2", "<FLTR><FLID>15</FLID></FLTR>"), `RECS "2"`},
	}
	for i, tc := range cases {
		id := int64(i + 2)
		h.run(id, tc.raw)
		r := h.proc(id)
		require.Equal(t, StateDead, r.State, "case %d: %s", i, r.Reason)
		require.Equal(t, ClassProtocol, r.ErrorClass, "case %d", i)
		require.Contains(t, r.Reason, tc.reason, "case %d", i)
		require.Equal(t, 1, h.mailboxRows(id))
		require.Equal(t, before, h.snapshotTables(), "case %d wrote nothing", i)
	}
}

// TestSchd_R_C5_DelDeletesByFLIDWithCodeShareChildren: SCHD DEL deletes
// the flights its records name by FLID (catalogue §3; a record carrying
// only FLID is enough) as FDEL does (R-C5, C-25): DELETED with a version
// bump and the deletion events, each with its ACTIVE code-share children,
// and the master of a deleted child rewritten in the same transaction
// (INV-22). FLIDs naming no ACTIVE flight are listed in the reason; a DEL
// that deletes nothing is SKIPPED with that reason (R-C4).
func TestSchd_R_C5_DelDeletesByFLIDWithCodeShareChildren(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>"), fltr(17, day23, "<MAID>20</MAID>"), fltr(20, day23), fltr(21, day23)))
	require.EqualValues(t, 1, h.flight(20).Version, "children first: the master is written once")

	h.run(2, schd(2, "DEL", "<FLTR><FLID>15</FLID></FLTR>", fltr(17, day23), "<FLTR><FLID>99</FLID></FLTR>", "<FLTR><FLID>16</FLID></FLTR>"))
	r := h.proc(2)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "DEL: 4 records, 3 flights deleted; flight 99 not found", r.Reason,
		"16 went with its master and is no missing flight")
	for _, flid := range []int64{15, 16, 17} {
		f := h.flight(flid)
		require.Equal(t, "DELETED", f.State, "flight %d", flid)
		require.EqualValues(t, 2, f.Version, "flight %d", flid)
	}
	require.Equal(t, []string{EventDeleted}, h.eventTypes("16", 2))
	f20 := h.flight(20)
	require.EqualValues(t, 2, f20.Version, "the master that lost 17 is rewritten by the same message")
	require.NotContains(t, f20.Doc, "MAFL")
	require.Equal(t, []string{EventUpdated}, h.eventTypes("20", 2))
	require.Equal(t, "ACTIVE", h.flight(21).State, "a DEL deletes only what it names")
	require.Equal(t, map[int64]int64{15: 2, 16: 2, 17: 2, 20: 2}, h.pending(2))

	h.run(3, schd(3, "DEL", "<FLTR><FLID>15</FLID></FLTR>", "<FLTR><FLID>98</FLID></FLTR>"))
	r = h.proc(3)
	require.Equal(t, StateSkipped, r.State)
	require.Equal(t, "SCHD DEL deleted nothing: flight 15 is deleted; flight 98 not found", r.Reason)
	require.Equal(t, 1, h.mailboxRows(3))
	require.EqualValues(t, 2, h.flight(15).Version)
}

// TestIdempotency_INV20b_SchdAddUpdDelTwice: SCHD ADD, UPD and DEL run
// again — the same message re-opened with its identity, or a copy under a
// new SEQN — change nothing: the upsert finds equal documents, the flights
// to delete are already deleted (SKIPPED with the reason, like FDEL).
func TestIdempotency_INV20b_SchdAddUpdDelTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>")))
	h.ackAll()
	msgs := []struct {
		styp, raw, again string
	}{
		{"ADD", schd(2, "ADD", fltr(17, day23, "<MAID>15</MAID>")), StateSucceeded},
		{"UPD", schd(3, "UPD", fltr(16, day23, "<MAID>15</MAID><TRML>T1</TRML>")), StateSucceeded},
		{"DEL", schd(4, "DEL", "<FLTR><FLID>15</FLID></FLTR>"), StateSkipped},
	}
	id := int64(1)
	for _, m := range msgs {
		id++
		first := id
		h.run(first, m.raw)
		h.ackAll()
		require.Equal(t, StateSucceeded, h.state(first), "%s: %s", m.styp, h.proc(first).Reason)
		after := h.businessTables()

		h.replay(first)
		h.drain()
		h.ackAll()
		require.Equal(t, m.again, h.state(first), "%s replayed: %s", m.styp, h.proc(first).Reason)
		require.Equal(t, after, h.businessTables(), "%s replayed changes nothing", m.styp)

		id++
		h.run(id, seqnPattern.ReplaceAllString(m.raw, "<SEQN>9$1</SEQN>"))
		h.ackAll()
		require.Equal(t, m.again, h.state(id), "%s copy: %s", m.styp, h.proc(id).Reason)
		require.Equal(t, after, h.businessTables(), "%s copy changes nothing", m.styp)
	}
}

// TestUnsupported_R_B9_ParkedAtFirstAttemptWithoutHoldingTheFIFO: a legal
// message without an implementation — a TYPE not in the catalogue, an
// inbound RQRD (our own request type, no inbound handler) — is parked
// DEAD(UNSUPPORTED) at its first attempt with its backfill intent (INV-8)
// and the reason naming it, so the messages behind it run at once, with
// no backoff (the fake clock never moves). Replayed, it runs again at
// once and, still unsupported, is parked again with a new intent.
func TestUnsupported_R_B9_ParkedAtFirstAttemptWithoutHoldingTheFIFO(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, envelope(1, "ZZZZ", "ADD", "<ZZZZ>1</ZZZZ>"))
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G1", "a")))
	h.insert(3, envelope(3, "RQRD", "GLST", "<RQRD><RTYP>GLST</RTYP></RQRD>"))
	h.insert(4, refMsg(4, "GLST", "ADD", glst("G2", "b")))
	require.Zero(t, h.drain(), "nothing waits for a backoff")
	require.True(t, h.clk.Now().Equal(t0))

	for id, want := range map[int64]string{1: `message type "ZZZZ" is not in the SIS catalogue`, 3: "no handler for RQRD/GLST"} {
		r := h.proc(id)
		require.Equal(t, StateDead, r.State, "message %d", id)
		require.Equal(t, ClassUnsupported, r.ErrorClass, "message %d", id)
		require.Contains(t, r.Reason, want)
		require.Contains(t, r.Reason, "parked DEAD(UNSUPPORTED) at its first attempt")
		require.Zero(t, r.Attempts, "message %d", id)
		require.NotNil(t, r.FinishedAt)
		require.Equal(t, 1, h.mailboxRows(id), "message %d carries its backfill intent", id)
	}
	require.Equal(t, "ZZZZ", h.proc(1).Type, "META is recorded, so a replay can select the type")
	require.Empty(t, h.proc(3).IdentityKey, "parked: it applied nothing, so it reserves no identity (R-K3)")
	require.Equal(t, StateSucceeded, h.state(2))
	require.Equal(t, StateSucceeded, h.state(4))

	req := h.requestReplay(1, 3)
	require.Zero(t, h.drain())
	require.Equal(t, "DONE", h.replayOutcome(req).State)
	for _, id := range []int64{1, 3} {
		r := h.proc(id)
		require.Equal(t, StateDead, r.State)
		require.Equal(t, ClassUnsupported, r.ErrorClass)
		require.Equal(t, 1, h.mailboxRows(id), "the earlier intent was withdrawn, the new outcome has its own")
	}
	require.Equal(t, 2, h.count(`SELECT count(*) FROM replay_audit WHERE previous_class='UNSUPPORTED'`))
}
