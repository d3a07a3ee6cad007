package apply

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/flight"
	"msgexchange/services/processor/internal/decide"
)

// loadOverlay is an overlay over tx with flids loaded as the executor
// loads a batch (QueueLoad, then Load from the batch's results).
func loadOverlay(t *testing.T, tx pgx.Tx, flids ...int64) *Overlay {
	t.Helper()
	b := &pgx.Batch{}
	QueueLoad(b, flids)
	br := tx.SendBatch(context.Background(), b)
	ov := NewOverlay(tx)
	require.NoError(t, ov.Load(br, flids))
	require.NoError(t, br.Close())
	return ov
}

// flush sends what ov queues, with the outbox rows of every change since
// m, and checks the statements' count and results.
func flush(t *testing.T, tx pgx.Tx, ov *Overlay, m Mark, statements int) {
	t.Helper()
	b := &pgx.Batch{}
	require.Equal(t, statements, ov.Queue(b, ov.OutboxSince(m)), "one statement per kind of write")
	br := tx.SendBatch(context.Background(), b)
	for range statements {
		_, err := br.Exec()
		require.NoError(t, err)
	}
	require.NoError(t, br.Close())
}

// change records c in ov.
func change(t *testing.T, ov *Overlay, c *decide.Change) {
	t.Helper()
	require.NoError(t, ov.Change(context.Background(), c))
}

// TestOverlay_R_J1_WritesEachFlightOnceAtItsLastState: a batch's decision
// is queued as one statement per kind: every flight it changed written
// once at its last state (a deleted one with the document it had, created
// when the batch first wrote it, an existing one keeping its creation),
// the outbox rows in decision order (a row no message caused without
// msg_id), and per message and flight the highest pending version — the
// rows one message at a time leaves (R-J1).
func TestOverlay_R_J1_WritesEachFlightOnceAtItsLastState(t *testing.T) {
	t.Parallel()
	_, tx, base := setup(t, 2)
	m1, m2, created, deleted := base+1, base+2, base+10, base+11
	addFlight(t, tx, deleted, "ACTIVE", 3, 0, base, doc(deleted, "STND", "3"))
	ov := loadOverlay(t, tx, created, deleted)
	start := ov.Mark()

	at1, at2 := t0, t0.Add(time.Second)
	change(t, ov, put(m1, created, 1, doc(created, "STND", "1"), at1))
	change(t, ov, put(m1, created, 2, doc(created, "STND", "2"), at1))
	change(t, ov, put(m1, deleted, 4, doc(deleted, "STND", "4"), at1))
	change(t, ov, put(m2, created, 3, doc(created, "STND", "3"), at2))
	change(t, ov, remove(m2, deleted, 5, at2))
	flush(t, tx, ov, start, 3)

	f := readFlight(t, tx, created)
	require.Equal(t, "ACTIVE", f.State)
	require.Equal(t, int64(3), f.Version)
	require.Equal(t, m2, f.LastMsgID)
	require.Equal(t, map[string]any(doc(created, "STND", "3")), f.Doc)
	require.True(t, f.Created.Equal(at1) && f.Updated.Equal(at2), "created %s, updated %s", f.Created, f.Updated)
	f = readFlight(t, tx, deleted)
	require.Equal(t, "DELETED", f.State)
	require.Equal(t, int64(5), f.Version)
	require.Equal(t, m2, f.LastMsgID)
	require.Equal(t, map[string]any(doc(deleted, "STND", "4")), f.Doc, "a deletion keeps the last document")
	require.True(t, f.Created.Equal(t0.Add(-time.Hour)), "an existing row keeps its creation: %s", f.Created)

	var got []string
	for _, o := range outboxOf(t, tx, created, deleted) {
		got = append(got, o.Target+":"+o.Pkey+":"+o.Payload)
	}
	c, d := formatID(created), formatID(deleted)
	require.Equal(t, []string{
		"flight-state:" + c + ":" + string(doc(created, "STND", "1").Canonical()), "msg:" + c + `:{"v":1}`, "schd:" + c + `:{"v":1}`,
		"flight-state:" + c + ":" + string(doc(created, "STND", "2").Canonical()), "msg:" + c + `:{"v":2}`, "schd:" + c + `:{"v":2}`,
		"flight-state:" + d + ":" + string(doc(deleted, "STND", "4").Canonical()), "msg:" + d + `:{"v":4}`, "schd:" + d + `:{"v":4}`,
		"flight-state:" + c + ":" + string(doc(created, "STND", "3").Canonical()), "msg:" + c + `:{"v":3}`, "schd:" + c + `:{"v":3}`,
		"flight-state:" + d + ":", "msg:" + d + `:{"v":5}`, "schd:" + d + `:{"v":5}`,
	}, got, "decision order")
	require.Equal(t, map[int64]int64{created: 2, deleted: 4}, pending(t, tx, m1))
	require.Equal(t, map[int64]int64{created: 3, deleted: 5}, pending(t, tx, m2))
}

// TestOverlay_R_J1_R_C4_RollbackToAMarkLeavesNothingOfTheMessage: a
// message of a batch that is rejected, skipped or parked is rolled back to
// its mark: the overlay reads as before it, and the batch's statements
// write nothing of it — no flight, outbox row, pending projection or
// reference data — while the messages around it are written (R-J1, a
// refused FLOP's earlier records, R-C4).
func TestOverlay_R_J1_R_C4_RollbackToAMarkLeavesNothingOfTheMessage(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 3)
	m1, m2, m3, kept, gone := base+1, base+2, base+3, base+10, base+11
	ov := loadOverlay(t, tx, kept, gone)
	start := ov.Mark()
	change(t, ov, put(m1, kept, 1, doc(kept, "STND", "1"), t0))

	mark := ov.Mark()
	change(t, ov, put(m2, kept, 2, doc(kept, "STND", "2"), t0))
	change(t, ov, put(m2, gone, 1, doc(gone), t0))
	require.NoError(t, ov.Ref(ctx, decide.RefOp{Kind: decide.RefUpsert, Type: "GLST", Key: formatID(gone), Doc: []byte(`{}`), MsgID: m2, Now: t0}))
	ov.Rollback(mark)
	require.Empty(t, ov.OutboxSince(mark))
	f, err := ov.Flight(ctx, kept)
	require.NoError(t, err)
	require.Equal(t, int64(1), f.Version, "reads as the batch's earlier message left it")
	f, err = ov.Flight(ctx, gone)
	require.NoError(t, err)
	require.Nil(t, f)

	change(t, ov, put(m3, kept, 2, doc(kept, "STND", "3"), t0))
	flush(t, tx, ov, start, 3)
	require.Equal(t, map[string]any(doc(kept, "STND", "3")), readFlight(t, tx, kept).Doc)
	require.Zero(t, count(t, tx, `SELECT count(*) FROM flight WHERE flid=$1`, gone))
	require.Zero(t, count(t, tx, `SELECT count(*) FROM outbox WHERE msg_id=$1`, m2))
	require.Zero(t, count(t, tx, `SELECT count(*) FROM projection_pending WHERE msg_id=$1`, m2))
	require.Zero(t, count(t, tx, `SELECT count(*) FROM ref_data WHERE key=$1`, formatID(gone)))
	require.Equal(t, 6, count(t, tx, `SELECT count(*) FROM outbox WHERE msg_id IN ($1, $2)`, m1, m3))
}

// TestOverlay_R_J1_R_C8_ChildrenAsTheBatchLeftThem: a later message of a
// batch sees the code-share children its earlier messages created,
// renamed or deleted, exactly as it would read them from the database
// after those messages one at a time (R-J1, R-C8).
func TestOverlay_R_J1_R_C8_ChildrenAsTheBatchLeftThem(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	master, stored, added := base+10, base+11, base+12
	m := formatID(master)
	addFlight(t, tx, master, "ACTIVE", 1, 0, base, doc(master))
	addFlight(t, tx, stored, "ACTIVE", 1, master, base, doc(stored, "MAID", m))
	ov := loadOverlay(t, tx, master)
	kids, err := ov.Children(ctx, master)
	require.NoError(t, err)
	require.Equal(t, []flight.Child{{FLID: stored, FLNO: "YG" + formatID(stored)}}, kids, "loaded with the batch")

	change(t, ov, put(base+1, added, 1, doc(added, "MAID", m, "FLNO", "CA12"), t0))
	change(t, ov, put(base+1, stored, 2, doc(stored, "MAID", m, "FLNO", "CA11"), t0))
	kids, err = ov.Children(ctx, master)
	require.NoError(t, err)
	require.Equal(t, []flight.Child{{FLID: stored, FLNO: "CA11"}, {FLID: added, FLNO: "CA12"}}, kids)

	gone := remove(base+2, stored, 3, t0)
	gone.Row.Master = &master // a deletion keeps the stored row's master (decide's Writer.Remove)
	change(t, ov, gone)
	kids, err = ov.Children(ctx, master)
	require.NoError(t, err)
	require.Equal(t, []flight.Child{{FLID: added, FLNO: "CA12"}}, kids, "a deleted child is no child")
}

// TestOverlay_R_J1_R_L1_ReadsTheLoadedRowsAndAReadErrorOfOthers: what the
// batch loaded — its flights (one absent known as absent), their
// code-share children, the archived versions a resent flight continues
// from (R-L1) — is read from the overlay without another statement; a row
// it did not load is read from the transaction, and a failed read there is
// a ReadError: the executor then rolls the batch back and charges no
// message (R-J1), instead of taking it for the message's own failure.
func TestOverlay_R_J1_R_L1_ReadsTheLoadedRowsAndAReadErrorOfOthers(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	stored, child, absent, archived, other := base+10, base+11, base+12, base+13, base+14
	addFlight(t, tx, stored, "ACTIVE", 2, 0, base, doc(stored, "STND", "2"))
	addFlight(t, tx, child, "ACTIVE", 1, stored, base, doc(child, "MAID", formatID(stored)))
	addFlight(t, tx, other, "ACTIVE", 1, 0, base, doc(other))
	addHistory(t, tx, archived, "ACTIVE", 4)
	ov := loadOverlay(t, tx, stored, absent, archived)

	// The transaction fails every statement from here on.
	_, err := tx.Exec(ctx, `SELECT 1/0`)
	require.Error(t, err)

	f, err := ov.Flight(ctx, stored)
	require.NoError(t, err)
	require.Equal(t, int64(2), f.Version)
	require.Equal(t, flight.Doc(doc(stored, "STND", "2")), f.Doc)
	f, err = ov.Flight(ctx, child)
	require.NoError(t, err, "a child is loaded with its master")
	require.Equal(t, &stored, f.Master)
	f, err = ov.Flight(ctx, absent)
	require.NoError(t, err)
	require.Nil(t, f)
	kids, err := ov.Children(ctx, stored)
	require.NoError(t, err)
	require.Equal(t, []flight.Child{{FLID: child, FLNO: "YG" + formatID(child)}}, kids)
	v, err := ov.Retired(ctx, archived)
	require.NoError(t, err)
	require.Equal(t, int64(5), v, "above the tombstone of an archived ACTIVE version")

	var rerr *ReadError
	_, err = ov.Flight(ctx, other)
	require.ErrorAs(t, err, &rerr)
	_, err = ov.Children(ctx, other)
	require.ErrorAs(t, err, &rerr)
	_, err = ov.Retired(ctx, other)
	require.ErrorAs(t, err, &rerr)
	require.ErrorContains(t, rerr, "current transaction is aborted")
}

// TestOverlay_R_J1_R_C10_ReferenceWritesInDecisionOrder: a batch's
// reference-data writes run in the order its messages made them, so a
// key added and deleted in one batch is gone, and one deleted and added
// again is stored (R-J1, R-C10).
func TestOverlay_R_J1_R_C10_ReferenceWritesInDecisionOrder(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	a, b := "A"+formatID(base), "B"+formatID(base)
	ov := loadOverlay(t, tx)
	start := ov.Mark()
	for _, op := range []decide.RefOp{
		{Kind: decide.RefUpsert, Type: "GLST", Key: a, Doc: []byte(`{"GCOD": "A"}`), MsgID: base + 1, Now: t0},
		{Kind: decide.RefDelete, Type: "GLST", Key: b},
		{Kind: decide.RefDelete, Type: "GLST", Key: a},
		{Kind: decide.RefUpsert, Type: "GLST", Key: b, Doc: []byte(`{"GCOD": "B"}`), MsgID: base + 2, Now: t0},
	} {
		require.NoError(t, ov.Ref(ctx, op))
	}
	flush(t, tx, ov, start, 4)
	require.Zero(t, count(t, tx, `SELECT count(*) FROM ref_data WHERE type='GLST' AND key=$1`, a))
	require.Equal(t, 1, count(t, tx, `SELECT count(*) FROM ref_data WHERE type='GLST' AND key=$1 AND last_msg_id=$2`, b, base+2))
}
