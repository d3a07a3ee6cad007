package apply

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/flight"
	"msgexchange/services/processor/internal/decide"
)

// TestTxSink_R_C3_INV17b_WritesTheFlightWithItsEventsAndPendingProjection:
// a change of one message is written into the message's transaction: a new
// flight at the decided version with its operation day, code-share master,
// message and document; a later version replaces them but keeps when the
// row was created; each change's outbox rows (one per target, payload and
// headers as decided, due when written) and its pending projection commit
// with it (INV-17b, INV-23). The version is the decision's: apply bumps
// nothing itself (INV-13 is decide's TestVersion_R_C3_*).
func TestTxSink_R_C3_INV17b_WritesTheFlightWithItsEventsAndPendingProjection(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 2)
	m1, m2, flid, master := base+1, base+2, base+10, base+11
	s := TxSink{Tx: tx}

	first := doc(flid, "STND", "501", "MAID", formatID(master))
	require.NoError(t, s.Change(ctx, put(m1, flid, 1, first, t0)))
	f := readFlight(t, tx, flid)
	require.Equal(t, "ACTIVE", f.State)
	require.Equal(t, int64(1), f.Version)
	require.Equal(t, m1, f.LastMsgID)
	require.True(t, f.OpDay.Equal(day23))
	require.Equal(t, &master, f.Master)
	require.Equal(t, map[string]any(first), f.Doc)
	require.True(t, f.Created.Equal(t0) && f.Updated.Equal(t0), "created %s, updated %s", f.Created, f.Updated)

	second := doc(flid, "STND", "502")
	at := t0.Add(time.Minute)
	require.NoError(t, s.Change(ctx, put(m2, flid, 2, second, at)))
	f = readFlight(t, tx, flid)
	require.Equal(t, int64(2), f.Version)
	require.Equal(t, m2, f.LastMsgID)
	require.Nil(t, f.Master, "the code-share master is the last document's")
	require.Equal(t, map[string]any(second), f.Doc)
	require.True(t, f.Created.Equal(t0), "created when first written: %s", f.Created)
	require.True(t, f.Updated.Equal(at), "updated %s", f.Updated)

	rows := outboxOf(t, tx, flid)
	require.Equal(t, []string{"flight-state", "msg", "schd", "flight-state", "msg", "schd"}, targets(rows))
	require.Equal(t, string(first.Canonical()), rows[0].Payload)
	require.JSONEq(t, `{"msgx-version": "1"}`, rows[0].Headers)
	require.Equal(t, `{"v":2}`, rows[4].Payload)
	for i, o := range rows {
		want, when := m1, t0
		if i >= 3 {
			want, when = m2, at
		}
		require.Equal(t, &want, o.MsgID, "row %d", i)
		require.True(t, o.Due.Equal(when) && o.Created.Equal(when), "row %d due %s created %s", i, o.Due, o.Created)
	}
	require.Equal(t, map[int64]int64{flid: 1}, pending(t, tx, m1))
	require.Equal(t, map[int64]int64{flid: 2}, pending(t, tx, m2))
}

// TestTxSink_R_C5_DeletionKeepsTheLastDocumentWithItsTombstone: a
// deletion stores the flight DELETED at its new version with the message
// that deleted it, leaves its last document, operation day and master as
// they were, and writes its tombstone (a flight-state row without
// payload) and its pending projection; a flight sent again after its
// deletion is ACTIVE again at the next version (R-C5).
func TestTxSink_R_C5_DeletionKeepsTheLastDocumentWithItsTombstone(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 2)
	m1, m2, flid, master := base+1, base+2, base+10, base+11
	stored := doc(flid, "STND", "501", "MAID", formatID(master))
	addFlight(t, tx, flid, "ACTIVE", 3, master, base, stored)
	s := TxSink{Tx: tx}

	require.NoError(t, s.Change(ctx, remove(m1, flid, 4, t0)))
	f := readFlight(t, tx, flid)
	require.Equal(t, "DELETED", f.State)
	require.Equal(t, int64(4), f.Version)
	require.Equal(t, m1, f.LastMsgID)
	require.Equal(t, map[string]any(stored), f.Doc, "the last document is kept")
	require.True(t, f.OpDay.Equal(day23))
	require.Equal(t, &master, f.Master)
	require.True(t, f.Updated.Equal(t0))
	rows := outboxOf(t, tx, flid)
	require.Equal(t, []string{"flight-state", "msg", "schd"}, targets(rows))
	require.Empty(t, rows[0].Payload, "tombstone: no value")
	require.JSONEq(t, `{"msgx-version": "4"}`, rows[0].Headers)
	require.Equal(t, map[int64]int64{flid: 4}, pending(t, tx, m1))

	again := doc(flid, "STND", "503")
	require.NoError(t, s.Change(ctx, put(m2, flid, 5, again, t0.Add(time.Second))))
	f = readFlight(t, tx, flid)
	require.Equal(t, "ACTIVE", f.State)
	require.Equal(t, int64(5), f.Version)
	require.Equal(t, map[string]any(again), f.Doc)
}

// TestTxSink_R_B7_PendingProjectionIsTheMessagesHighestVersion: a message
// that changes a flight twice leaves one pending projection of the flight,
// at the higher version, whatever order the versions come in — an ack of
// a lower version does not finish the message (R-B7, INV-23) — and one
// per flight it changed.
func TestTxSink_R_B7_PendingProjectionIsTheMessagesHighestVersion(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 1)
	msg, a, b := base+1, base+10, base+11
	s := TxSink{Tx: tx}
	for _, c := range []*decide.Change{put(msg, a, 1, doc(a), t0), put(msg, b, 3, doc(b, "STND", "3"), t0), put(msg, b, 2, doc(b, "STND", "2"), t0)} {
		require.NoError(t, s.Change(ctx, c))
	}
	require.Equal(t, map[int64]int64{a: 1, b: 3}, pending(t, tx, msg))
}

// TestTxSink_R_C10_ReferenceDataByTypeAndKey: reference data is stored by
// (type, key) with the message that changed it; a document equal to the
// stored one is not rewritten (the row keeps its message and time); a
// deletion removes its key; a DNLD's replacement removes every key of its
// type it does not carry, and no key of another type.
func TestTxSink_R_C10_ReferenceDataByTypeAndKey(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	a, b, c := "A"+formatID(base), "B"+formatID(base), "C"+formatID(base)
	s := TxSink{Tx: tx}
	upsert := func(typ, key, doc string, msg int64, at time.Time) {
		t.Helper()
		require.NoError(t, s.Ref(ctx, decide.RefOp{Kind: decide.RefUpsert, Type: typ, Key: key, Doc: []byte(doc), MsgID: msg, Now: at}))
	}
	type refRow struct {
		Doc     string
		Msg     int64
		Updated time.Time
	}
	read := func(typ string) map[string]refRow {
		t.Helper()
		rows, err := tx.Query(ctx, `SELECT key, doc::text, last_msg_id, updated_at FROM ref_data WHERE type=$1 AND key = ANY($2)`, typ, []string{a, b, c})
		require.NoError(t, err)
		out := map[string]refRow{}
		var k string
		var r refRow
		for rows.Next() {
			require.NoError(t, rows.Scan(&k, &r.Doc, &r.Msg, &r.Updated))
			r.Updated = r.Updated.UTC()
			out[k] = r
		}
		require.NoError(t, rows.Err())
		return out
	}

	upsert("GLST", a, `{"GCOD": "A", "GTNM": "a"}`, base+1, t0)
	upsert("GLST", b, `{"GCOD": "B", "GTNM": null}`, base+1, t0)
	upsert("SLST", a, `{"SCOD": "A"}`, base+1, t0)
	upsert("GLST", a, `{"GCOD": "A", "GTNM": "a"}`, base+2, t0.Add(time.Second))
	require.Equal(t, map[string]refRow{
		a: {`{"GCOD": "A", "GTNM": "a"}`, base + 1, t0},
		b: {`{"GCOD": "B", "GTNM": null}`, base + 1, t0},
	}, read("GLST"), "an equal document is not written again")

	upsert("GLST", a, `{"GCOD": "A", "GTNM": "a2"}`, base+3, t0.Add(2*time.Second))
	require.Equal(t, refRow{`{"GCOD": "A", "GTNM": "a2"}`, base + 3, t0.Add(2 * time.Second)}, read("GLST")[a])

	require.NoError(t, s.Ref(ctx, decide.RefOp{Kind: decide.RefDelete, Type: "GLST", Key: b}))
	require.NotContains(t, read("GLST"), b)

	upsert("GLST", c, `{"GCOD": "C"}`, base+4, t0)
	require.NoError(t, s.Ref(ctx, decide.RefOp{Kind: decide.RefReplace, Type: "GLST", Keys: []string{c}}))
	require.Equal(t, []string{c}, keysOf(read("GLST")), "the type holds what the DNLD carries")
	require.Equal(t, []string{a}, keysOf(read("SLST")), "another type is not touched")
}

// TestTxView_R_C8_INV21_FlightsAndTheirActiveCodeShareChildren: the view
// reads a stored flight whole (state, version, day, master, document), nil
// for one never stored; a master's children are its ACTIVE flights by
// MAID, in ascending FLID with their FLNO — not a deleted child, a child
// of another master, or the master itself — which is what its MAFL is
// derived from (R-C8, INV-21).
func TestTxView_R_C8_INV21_FlightsAndTheirActiveCodeShareChildren(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	master, other := base+10, base+20
	addFlight(t, tx, master, "ACTIVE", 2, master, base, doc(master, "MAID", formatID(master)))
	addFlight(t, tx, base+13, "ACTIVE", 1, master, base, doc(base+13, "FLNO", "CA13"))
	addFlight(t, tx, base+12, "ACTIVE", 1, master, base, doc(base+12, "FLNO", "CA12"))
	addFlight(t, tx, base+14, "DELETED", 2, master, base, doc(base+14))
	addFlight(t, tx, base+15, "ACTIVE", 1, other, base, doc(base+15))
	v := TxView{Tx: tx}

	f, err := v.Flight(ctx, master)
	require.NoError(t, err)
	require.Equal(t, &decide.Flight{FLID: master, State: "ACTIVE", Version: 2, OpDay: f.OpDay, Master: &master,
		Doc: flight.Doc{"FLID": formatID(master), "FLNO": "YG" + formatID(master), "MAID": formatID(master)}}, f)
	require.True(t, f.OpDay.Equal(day23))
	none, err := v.Flight(ctx, base+99)
	require.NoError(t, err)
	require.Nil(t, none)

	kids, err := v.Children(ctx, master)
	require.NoError(t, err)
	require.Equal(t, []flight.Child{{FLID: base + 12, FLNO: "CA12"}, {FLID: base + 13, FLNO: "CA13"}}, kids)
}

// TestTxView_R_L1_RetiredIsTheHighestVersionPublished: a flight the
// history sweep archived continues from the highest version published for
// it: an archived ACTIVE version also published its tombstone one above
// it, an archived DELETED version is the highest itself; a flight never
// archived has 0 (R-L1).
func TestTxView_R_L1_RetiredIsTheHighestVersionPublished(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	active, deleted, never := base+10, base+11, base+12
	addHistory(t, tx, active, "ACTIVE", 3)
	addHistory(t, tx, deleted, "ACTIVE", 2)
	addHistory(t, tx, deleted, "DELETED", 5)
	v := TxView{Tx: tx}
	for flid, want := range map[int64]int64{active: 4, deleted: 5, never: 0} {
		got, err := v.Retired(ctx, flid)
		require.NoError(t, err)
		require.Equal(t, want, got, "flight %d", flid)
	}
}
