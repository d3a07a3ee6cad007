package procstate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/migrations/migratetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

// newDB is a migrated database of the test's own.
func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := migratetest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// insert registers messages in state.
func insert(t *testing.T, db *pgxpool.Pool, state string, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		_, err := db.Exec(context.Background(), `INSERT INTO proc_state (msg_id, raw, kafka_offset, state, registered_at, updated_at)
			VALUES ($1, '<MSG/>', $1, $2, $3, $3)`, id, state, t0)
		require.NoError(t, err)
	}
}

// row is the part of a proc_state row the transitions write.
type row struct {
	State, Class, Reason, Identity, By, SNDR string
	Attempts                                 int
	Started, Finished, Applied, Backfilled   *time.Time
	Through                                  *int64
}

func read(t *testing.T, db *pgxpool.Pool, id int64) row {
	t.Helper()
	var r row
	require.NoError(t, db.QueryRow(context.Background(), `
		SELECT state, COALESCE(error_class, ''), COALESCE(reason, ''), COALESCE(identity_key, ''), COALESCE(executing_by, ''),
			COALESCE(sndr, ''), attempts, processing_started_at, finished_at, applied_at, backfilled_at, executing_through
		FROM proc_state WHERE msg_id = $1`, id).
		Scan(&r.State, &r.Class, &r.Reason, &r.Identity, &r.By, &r.SNDR, &r.Attempts, &r.Started, &r.Finished, &r.Applied, &r.Backfilled, &r.Through))
	return r
}

// outboxRows lists the outbox rows as "target:pkey" in ID order.
func outboxRows(t *testing.T, db *pgxpool.Pool) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT target || ':' || pkey FROM outbox ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// inTx runs fn in a transaction that commits.
func inTx(t *testing.T, db *pgxpool.Pool, fn func(pgx.Tx) error) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(context.Background(), db, fn))
}

// sameTime fails unless got is the instant want.
func sameTime(t *testing.T, want time.Time, got *time.Time, msg ...any) {
	t.Helper()
	require.NotNil(t, got, msg...)
	require.True(t, want.Equal(*got), "want %s, got %s %v", want, *got, msg)
}

// eachSize runs fn, in parallel on a database of its own, for one message
// and for five (msg_id 10 on): every kind is one statement for both.
func eachSize(t *testing.T, fn func(t *testing.T, db *pgxpool.Pool, msgs []int64)) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			msgs := make([]int64, n)
			for i := range msgs {
				msgs[i] = 10 + int64(i)
			}
			fn(t, newDB(t), msgs)
		})
	}
}

// TestFinish_R_B6_INV8_StateAndIntentInOneStatement: a terminal state is
// written with its mailbox intent by the same statement, for one message
// and for many, with class, reason, META, identity and attempts; a
// message ending DEAD or SKIPPED gives its identity up (R-K3).
func TestFinish_R_B6_INV8_StateAndIntentInOneStatement(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, db *pgxpool.Pool, msgs []int64) {
		ctx := context.Background()
		n := len(msgs)
		insert(t, db, Pending, msgs...)
		var rows []Finish
		for i, id := range msgs {
			f := Finish{MsgID: id, State: Succeeded, Reason: "ok", At: t1, Meta: Meta{SNDR: "AODB"}, Identity: fmt.Sprintf("K%d", id)}
			if i%2 == 1 {
				f.State, f.Class, f.Reason, f.Attempts = Dead, "EXHAUSTED", "gave up", 3
			}
			rows = append(rows, f)
		}
		finished, err := WriteFinish(ctx, db, rows...)
		require.NoError(t, err)
		require.Equal(t, n, finished)
		var want []string
		for i, id := range msgs {
			r := read(t, db, id)
			require.Equal(t, rows[i].State, r.State)
			require.Equal(t, rows[i].Class, r.Class)
			require.Equal(t, rows[i].Reason, r.Reason)
			require.Equal(t, "AODB", r.SNDR)
			sameTime(t, t1, r.Finished)
			sameTime(t, t1, r.Started, "a message finished without a processing start gets one")
			if rows[i].State == Dead {
				require.Empty(t, r.Identity, "DEAD applied nothing and reserves no key (R-K3)")
				require.Equal(t, 3, r.Attempts)
			} else {
				require.Equal(t, rows[i].Identity, r.Identity)
				require.Zero(t, r.Attempts)
			}
			want = append(want, fmt.Sprintf("mailbox:%d", id))
		}
		require.Equal(t, want, outboxRows(t, db), "one intent per terminal state")
	})
}

// TestFinish_INV6_TerminalStatesAreFinal: the guard refuses to finish a
// message that is already terminal — it is not counted and gets no
// second intent — while the open ones of the same statement finish.
func TestFinish_INV6_TerminalStatesAreFinal(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1, 3)
	insert(t, db, Dead, 2)
	n, err := WriteFinish(ctx, db,
		Finish{MsgID: 1, State: Skipped, At: t1}, Finish{MsgID: 2, State: Succeeded, At: t1}, Finish{MsgID: 3, State: Skipped, At: t1})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, Dead, read(t, db, 2).State)
	require.Nil(t, read(t, db, 2).Finished)
	require.Equal(t, []string{"mailbox:1", "mailbox:3"}, outboxRows(t, db))
}

// TestFinish_R_J1_INV8_OutboxInDecisionOrder: a batch's outbox rows and
// intents are written in decision order, an intent in the place of its
// message; the intent of a message the guard refused is not written, and
// an intent without a place follows the rows.
func TestFinish_R_J1_INV8_OutboxInDecisionOrder(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1, 3, 4)
	insert(t, db, Succeeded, 2)
	ordered := []OutboxRow{
		{Target: "msg", Pkey: "a", MsgID: 1, At: t1, Headers: []byte(`{"h":"1"}`)},
		{Target: "mailbox", Pkey: "1", MsgID: 1, At: t1},
		{Target: "mailbox", Pkey: "2", MsgID: 2, At: t1}, // already terminal: refused
		{Target: "flight-state", Pkey: "b", MsgID: 3, At: t1},
		{Target: "mailbox", Pkey: "3", MsgID: 3, At: t1},
		{Target: "schd", Pkey: "c", At: t1}, // caused by no message
	}
	var finished int
	b := &pgx.Batch{}
	QueueFinish(b, []Finish{{MsgID: 4, State: Dead, At: t1}, {MsgID: 3, State: Skipped, At: t1}, {MsgID: 2, State: Dead, At: t1},
		{MsgID: 1, State: Succeeded, At: t1}}, ordered, func(n int) error { finished = n; return nil })
	inTx(t, db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	require.Equal(t, 3, finished)
	require.Equal(t, []string{"msg:a", "mailbox:1", "flight-state:b", "mailbox:3", "schd:c", "mailbox:4"}, outboxRows(t, db))
	var headers *string
	var msgID *int64
	require.NoError(t, db.QueryRow(ctx, `SELECT headers::text, (SELECT msg_id FROM outbox WHERE target = 'schd') FROM outbox WHERE target = 'msg'`).
		Scan(&headers, &msgID))
	require.JSONEq(t, `{"h":"1"}`, *headers)
	require.Nil(t, msgID, "a row no message caused has no msg_id")
}

// TestApply_INV23_R_H4_OnlyWithAPendingProjection: APPLIED is written
// for open messages with a pending projection, for one and for many; an
// open message with nothing pending and a terminal one are left out.
func TestApply_INV23_R_H4_OnlyWithAPendingProjection(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, db *pgxpool.Pool, msgs []int64) {
		ctx := context.Background()
		n := len(msgs)
		insert(t, db, Failed, msgs...)
		insert(t, db, Pending, 1)
		insert(t, db, Succeeded, 2)
		var rows []Apply
		for _, id := range append([]int64{1, 2}, msgs...) {
			_, err := db.Exec(ctx, `INSERT INTO projection_pending (msg_id, flid, version) VALUES ($1, 7, 1)`, id)
			require.NoError(t, err)
			rows = append(rows, Apply{MsgID: id, Note: "n", At: t1, Meta: Meta{SNDR: "AODB"}, Identity: fmt.Sprintf("K%d", id)})
		}
		_, err := db.Exec(ctx, `DELETE FROM projection_pending WHERE msg_id = 1`)
		require.NoError(t, err)
		var moved []AppliedAt
		b := &pgx.Batch{}
		QueueApply(b, rows, func(a []AppliedAt) error { moved = a; return nil })
		inTx(t, db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
		require.Len(t, moved, n)
		for _, id := range msgs {
			r := read(t, db, id)
			require.Equal(t, Applied, r.State)
			sameTime(t, t1, r.Applied)
			require.Equal(t, fmt.Sprintf("K%d", id), r.Identity)
			require.Equal(t, "n", r.Reason)
		}
		require.Equal(t, Pending, read(t, db, 1).State, "nothing pending: its caller finishes it")
		require.Equal(t, Succeeded, read(t, db, 2).State)
		require.Empty(t, outboxRows(t, db), "APPLIED has no intent yet (INV-23)")
	})
}

// TestFail_R_B3_CountsTheAttemptOfOpenMessages: FAILED with its attempt
// and next attempt, for one and for many; a terminal message is refused.
func TestFail_R_B3_CountsTheAttemptOfOpenMessages(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, db *pgxpool.Pool, msgs []int64) {
		ctx := context.Background()
		n := len(msgs)
		insert(t, db, Pending, msgs...)
		insert(t, db, Dead, 1)
		var rows []Fail
		for _, id := range append(msgs, 1) {
			rows = append(rows, Fail{MsgID: id, Class: "INFRA", Reason: "down", Attempts: 2, Next: t1.Add(time.Second), At: t1})
		}
		failed, err := WriteFails(ctx, db, rows...)
		require.NoError(t, err)
		require.Equal(t, n, failed)
		for _, id := range msgs {
			r := read(t, db, id)
			require.Equal(t, Failed, r.State)
			require.Equal(t, 2, r.Attempts)
			sameTime(t, t1, r.Started)
		}
		require.Equal(t, Dead, read(t, db, 1).State)
	})
}

// TestClaim_R_H1_MarksAnOpenHeadAndHandsOn: a claim marks an open head
// (a batch with its last message) and withdraws the instance's previous
// claim; a terminal head is refused; the hand-over moves the claim to the
// next due head; a crashed instance's claims are released.
func TestClaim_R_H1_MarksAnOpenHeadAndHandsOn(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1, 2, 3)
	insert(t, db, Dead, 9)
	refused := errors.New("refused")
	claim := func(c Claim) bool {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			QueueClaim(b, c)
			err := tx.SendBatch(ctx, b).Close()
			if Checked(err) {
				return refused // the claim's statement aborted tx
			}
			return err
		})
		if errors.Is(err, refused) {
			return false
		}
		require.NoError(t, err)
		return true
	}
	require.True(t, claim(Claim{Head: 1, Instance: "a", At: t0}))
	require.Equal(t, "a", read(t, db, 1).By)
	require.Nil(t, read(t, db, 1).Through)
	require.True(t, claim(Claim{Head: 2, Through: 3, Instance: "a", At: t1, Previous: 1}))
	require.Empty(t, read(t, db, 1).By, "the previous claim is withdrawn")
	require.Equal(t, int64(3), *read(t, db, 2).Through)
	sameTime(t, t1, read(t, db, 2).Started)
	require.False(t, claim(Claim{Head: 9, Instance: "a", At: t1}), "a terminal message is never claimed")

	// The head 2 is finished; the hand-over claims 3.
	_, err := WriteFinish(ctx, db, Finish{MsgID: 2, State: Succeeded, At: t1})
	require.NoError(t, err)
	var next int64
	var open bool
	inTx(t, db, func(tx pgx.Tx) error {
		var err error
		next, open, err = WriteHandOver(ctx, tx, HandOver{From: 2, Instance: "a", At: t1, Floor: 1})
		return err
	})
	require.Equal(t, int64(1), next, "1 is open and due: the smallest open message is the head")
	require.False(t, open)

	require.NoError(t, Unclaim(ctx, db, "a", 1))
	require.Empty(t, read(t, db, 1).By)
	require.True(t, claim(Claim{Head: 1, Through: 3, Instance: "b", At: t1}))
	require.NoError(t, Release(ctx, db, "b", 1, true))
	require.Empty(t, read(t, db, 1).By)
	require.Nil(t, read(t, db, 1).Started, "the start the claim gave is withdrawn")
	require.True(t, claim(Claim{Head: 1, Instance: "dead", At: t1}))
	require.NoError(t, ReleaseFrom(ctx, db, "dead", 1))
	require.Empty(t, read(t, db, 1).By)
}

// TestSucceed_INV23_R_H4_WhenNothingIsPending: an APPLIED message with
// nothing pending becomes SUCCEEDED with its intent, for one and for
// many; one with a pending projection stays APPLIED; the self-check's
// cutoff spares a message applied after it.
func TestSucceed_INV23_R_H4_WhenNothingIsPending(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, db *pgxpool.Pool, msgs []int64) {
		ctx := context.Background()
		n := len(msgs)
		insert(t, db, Applied, append(msgs, 1, 2)...)
		_, err := db.Exec(ctx, `UPDATE proc_state SET applied_at = $1`, t0)
		require.NoError(t, err)
		_, err = db.Exec(ctx, `INSERT INTO projection_pending (msg_id, flid, version) VALUES (1, 7, 1)`)
		require.NoError(t, err)
		_, err = db.Exec(ctx, `UPDATE proc_state SET applied_at = $1 WHERE msg_id = 2`, t1)
		require.NoError(t, err)
		var done []SucceededAt
		b := &pgx.Batch{}
		cutoff := t0.Add(time.Second)
		QueueSucceed(b, append(msgs, 1, 2), t1, &cutoff, func(s []SucceededAt) error { done = s; return nil })
		inTx(t, db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
		require.Len(t, done, n)
		var want []string
		for i, id := range msgs {
			require.Equal(t, id, done[i].MsgID)
			sameTime(t, t0, done[i].Applied)
			require.Equal(t, Succeeded, read(t, db, id).State)
			want = append(want, fmt.Sprintf("mailbox:%d", id))
		}
		require.Equal(t, Applied, read(t, db, 1).State, "a projection is pending")
		require.Equal(t, Applied, read(t, db, 2).State, "applied after the cutoff")
		require.Equal(t, want, outboxRows(t, db))
	})
}

// TestRepairIntent_R_H4_INV8_OnlyWhenMissing: the self-check writes the
// intent of a terminal message finished before the cutoff that has none,
// and never a second one.
func TestRepairIntent_R_H4_INV8_OnlyWhenMissing(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1)
	_, err := WriteFinish(ctx, db, Finish{MsgID: 1, State: Succeeded, At: t0})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	repair := func() bool {
		var ok bool
		b := &pgx.Batch{}
		QueueRepairIntent(b, 1, t1, t1, func(r bool) error { ok = r; return nil })
		inTx(t, db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
		return ok
	}
	require.True(t, repair())
	require.False(t, repair(), "an intent is waiting")
	require.Equal(t, []string{"mailbox:1"}, outboxRows(t, db))
}

// TestEnd_R_H3_INV8_OperatorEndsOpenMessages: an operator's end writes
// DEAD with its intent from PENDING, FAILED and APPLIED alike, keeps the
// identity of what was applied, and refuses a terminal message.
func TestEnd_R_H3_INV8_OperatorEndsOpenMessages(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1)
	insert(t, db, Failed, 2)
	insert(t, db, Applied, 3)
	insert(t, db, Skipped, 4)
	_, err := db.Exec(ctx, `UPDATE proc_state SET identity_key = 'K3' WHERE msg_id = 3`)
	require.NoError(t, err)
	var ended []Ended
	b := &pgx.Batch{}
	var rows []End
	for id := int64(1); id <= 4; id++ {
		rows = append(rows, End{MsgID: id, Class: "OPERATOR", Reason: "stop"})
	}
	QueueEnd(b, rows, t1, func(e []Ended) error { ended = e; return nil })
	inTx(t, db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	require.Len(t, ended, 3)
	for id := int64(1); id <= 3; id++ {
		r := read(t, db, id)
		require.Equal(t, Dead, r.State)
		require.Equal(t, "OPERATOR", r.Class)
	}
	require.Equal(t, "K3", read(t, db, 3).Identity)
	require.Equal(t, Skipped, read(t, db, 4).State)
	require.Equal(t, []string{"mailbox:1", "mailbox:2", "mailbox:3"}, outboxRows(t, db))
}

// TestBackfill_R_D4_RecordReopenDiscard: a marker written or abandoned
// finishes the message's backfill in the statement that settles its
// intent; a re-queued abandoned one reopens it; a discarded one finishes
// it for good.
func TestBackfill_R_D4_RecordReopenDiscard(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1, 2, 3)
	_, err := WriteFinish(ctx, db, Finish{MsgID: 1, State: Succeeded, At: t0}, Finish{MsgID: 2, State: Dead, At: t0},
		Finish{MsgID: 3, State: Skipped, At: t0})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `
		WITH o AS (
			UPDATE outbox SET state = CASE msg_id WHEN 1 THEN 'SENT' ELSE 'ABANDONED' END, sent_at = $1, outcome = 'written'
			WHERE msg_id IN (1, 2) RETURNING msg_id, state, outcome, sent_at)
		`+RecordBackfill("o", 2), t1, "abandoned")
	require.NoError(t, err)
	var outcome1, outcome2 string
	require.NoError(t, db.QueryRow(ctx, `SELECT (SELECT backfill_outcome FROM proc_state WHERE msg_id = 1),
		(SELECT backfill_outcome FROM proc_state WHERE msg_id = 2)`).Scan(&outcome1, &outcome2))
	require.Equal(t, "written", outcome1)
	require.Equal(t, "abandoned", outcome2)
	sameTime(t, t1, read(t, db, 2).Backfilled)

	var abandoned int64
	require.NoError(t, db.QueryRow(ctx, `SELECT id FROM outbox WHERE msg_id = 2`).Scan(&abandoned))
	require.NoError(t, ReopenBackfills(ctx, db, []int64{abandoned}))
	require.Nil(t, read(t, db, 2).Backfilled)
	require.NotNil(t, read(t, db, 1).Backfilled, "a marked message stays marked")

	require.NoError(t, DiscardBackfills(ctx, db, []int64{2, 3}, t1))
	sameTime(t, t1, read(t, db, 3).Backfilled)
}

// TestReplay_R_F1_R_B6_ReopensReplayableMessages: a replay opens FAILED
// and DEAD messages of the listed classes again, keeps their identity,
// withdraws their undelivered intents and records the audit; a message of
// another class, or open, is refused.
func TestReplay_R_F1_R_B6_ReopensReplayableMessages(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1, 2, 3)
	_, err := db.Exec(ctx, `UPDATE proc_state SET identity_key = 'K1' WHERE msg_id = 1`)
	require.NoError(t, err)
	_, err = WriteFinish(ctx, db, Finish{MsgID: 1, State: Dead, Class: "EXHAUSTED", At: t0},
		Finish{MsgID: 2, State: Dead, Class: "PROTOCOL", At: t0})
	require.NoError(t, err)
	_, err = db.Exec(ctx, `UPDATE proc_state SET identity_key = 'K1' WHERE msg_id = 1`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO replay_request (id, msg_ids, selector, operator, reason, requested_at) VALUES (7, '{1,2,3}', '{}', 'op', 'fixed', $1)`, t0)
	require.NoError(t, err)
	var replayed []int64
	inTx(t, db, func(tx pgx.Tx) error {
		var err error
		replayed, err = WriteReplay(ctx, tx, Replay{RequestID: 7, Operator: "op", Reason: "fixed", IDs: []int64{1, 2, 3},
			Classes: []string{"EXHAUSTED", "INFRA"}, At: t1})
		return err
	})
	require.Equal(t, []int64{1}, replayed)
	r := read(t, db, 1)
	require.Equal(t, Pending, r.State)
	require.Equal(t, "K1", r.Identity)
	require.Zero(t, r.Attempts)
	require.Nil(t, r.Finished)
	require.Equal(t, "replayed by request 7", r.Reason)
	require.Equal(t, Dead, read(t, db, 2).State)
	require.Equal(t, []string{"mailbox:2"}, outboxRows(t, db), "the intent of the reopened message is withdrawn")
	var audits int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM replay_audit WHERE msg_id = 1 AND previous_class = 'EXHAUSTED'`).Scan(&audits))
	require.Equal(t, 1, audits)
}

// TestBinds_R_B4_BindsEveryKey: identity bindings for one and for many.
func TestBinds_R_B4_BindsEveryKey(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1, 2)
	require.NoError(t, WriteBinds(ctx, db, Bind{MsgID: 1, Key: "A"}))
	require.NoError(t, WriteBinds(ctx, db, Bind{MsgID: 1, Key: "A"}, Bind{MsgID: 2, Key: "B"}))
	require.Equal(t, "A", read(t, db, 1).Identity)
	require.Equal(t, "B", read(t, db, 2).Identity)
	require.Error(t, WriteBinds(ctx, db, Bind{MsgID: 2, Key: "A"}), "a key is held by one message")
}

// TestNote_R_C6_ProgressOfAnOpenMessage: a snapshot's progress note sets
// the reason and leaves the message open.
func TestNote_R_C6_ProgressOfAnOpenMessage(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1)
	b := &pgx.Batch{}
	QueueNote(b, 1, "snapshot: 2 of 5 batches", t1)
	inTx(t, db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	r := read(t, db, 1)
	require.Equal(t, Pending, r.State)
	require.Equal(t, "snapshot: 2 of 5 batches", r.Reason)
}

// TestRegister_R_B2_INV9_OncePerMailboxIDInOneStatement: records are
// registered PENDING by one statement for one and for many, with their
// raw text, offset, receive time and trace context; an ID registered
// before inserts nothing and is not reported.
func TestRegister_R_B2_INV9_OncePerMailboxIDInOneStatement(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, db *pgxpool.Pool, msgs []int64) {
		ctx := context.Background()
		insert(t, db, Succeeded, 1) // registered before
		rows := []Register{{MsgID: 1, Raw: "<AGAIN/>", Offset: 1}}
		for _, id := range msgs {
			rows = append(rows, Register{MsgID: id, Raw: fmt.Sprintf("<MSG n=%d/>", id), ReceivedAt: &t0, Offset: 100 + id, TraceParent: "00-tp"})
		}
		var got, cleaned []int64
		b := &pgx.Batch{}
		QueueRegister(b, rows, t1, func(ids, gone []int64) error { got, cleaned = ids, gone; return nil })
		require.NoError(t, send(ctx, db, b))
		require.ElementsMatch(t, msgs, got, "only the new IDs are registered")
		require.Empty(t, cleaned, "no record was cleaned up")
		for _, id := range msgs {
			var (
				raw, state, tp string
				off            int64
				rcv, reg       time.Time
				ts             *string
			)
			require.NoError(t, db.QueryRow(ctx, `SELECT raw, state, kafka_offset, received_at, registered_at, trace_parent, trace_state
				FROM proc_state WHERE msg_id = $1`, id).Scan(&raw, &state, &off, &rcv, &reg, &tp, &ts))
			require.Equal(t, fmt.Sprintf("<MSG n=%d/>", id), raw)
			require.Equal(t, Pending, state)
			require.Equal(t, 100+id, off)
			require.True(t, t0.Equal(rcv) && t1.Equal(reg), "received %s registered %s", rcv, reg)
			require.Equal(t, "00-tp", tp)
			require.Nil(t, ts, "no trace state: NULL")
		}
		require.Equal(t, Succeeded, read(t, db, 1).State, "the earlier registration stands")
		require.Empty(t, outboxRows(t, db))
	})
}

// TestRegisterDead_R_B2_INV8_UnreadableRecordFinishedWithItsIntent: a
// record that is not storable text is registered DEAD(MALFORMED) and
// finished with its mailbox intent in the same statement; registered
// before, it changes nothing.
func TestRegisterDead_R_B2_INV8_UnreadableRecordFinishedWithItsIntent(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 2)
	inserted := map[int64]bool{}
	b := &pgx.Batch{}
	for _, id := range []int64{1, 2} {
		QueueRegisterDead(b, Register{MsgID: id, Raw: "\uFFFD", Offset: id}, "not text", t1, func(ok bool) error { inserted[id] = ok; return nil })
	}
	require.NoError(t, send(ctx, db, b))
	require.Equal(t, map[int64]bool{1: true, 2: false}, inserted)
	r := read(t, db, 1)
	require.Equal(t, Dead, r.State)
	require.Equal(t, "MALFORMED", r.Class)
	require.Equal(t, "not text", r.Reason)
	sameTime(t, t1, r.Finished)
	require.Equal(t, Pending, read(t, db, 2).State, "registered before: unchanged")
	require.Equal(t, []string{"mailbox:1"}, outboxRows(t, db))
}

// TestReopenUnmarked_R_L6_INV8_RepublishedSameTextOnly: a republished
// message whose backfill is settled — its marker settled unwritten by
// shadow mode, or written and lost by the mailbox — gets its backfill
// opened again with a new intent in the same statement; one with another
// text, or whose backfill was abandoned or discarded, is left as it is.
func TestReopenUnmarked_R_L6_INV8_RepublishedSameTextOnly(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, db *pgxpool.Pool, msgs []int64) {
		ctx := context.Background()
		insert(t, db, Succeeded, append(msgs, 1, 2, 3, 4)...)
		_, err := db.Exec(ctx, `UPDATE proc_state SET backfilled_at = $1,
			backfill_outcome = CASE msg_id WHEN 2 THEN 'abandoned' WHEN 3 THEN 'discarded' ELSE 'shadowed' END`, t0)
		require.NoError(t, err)
		if len(msgs) > 1 {
			// The mailbox lost markers that were written.
			_, err = db.Exec(ctx, `UPDATE proc_state SET backfill_outcome = 'written' WHERE msg_id = $1`, msgs[0])
			require.NoError(t, err)
			_, err = db.Exec(ctx, `UPDATE proc_state SET backfill_outcome = 'already-marked' WHERE msg_id = $1`, msgs[1])
			require.NoError(t, err)
		}
		raws := make([]string, len(msgs))
		var want []string
		for i, id := range msgs {
			raws[i] = "<MSG/>"
			want = append(want, fmt.Sprintf("mailbox:%d", id))
		}
		require.NoError(t, ReopenUnmarked(ctx, db, append(msgs, 1, 2, 3), append(raws, "<OTHER/>", "<MSG/>", "<MSG/>"), t1))
		for _, id := range msgs {
			require.Nil(t, read(t, db, id).Backfilled)
		}
		require.NotNil(t, read(t, db, 1).Backfilled, "another text is another message (R-L5)")
		require.NotNil(t, read(t, db, 2).Backfilled, "an abandoned backfill is requeued by an operator")
		require.NotNil(t, read(t, db, 3).Backfilled, "a discarded backfill stays discarded")
		require.ElementsMatch(t, want, outboxRows(t, db))
	})
}

// TestAll_R_M2_INV8_StatementsCheckEveryMessageBeforeCommit: the batch
// forms of a terminal state and of APPLIED, whose transaction is sent with
// its COMMIT (lease.SendAtCommit) and so cannot be checked by the client
// in between, fail in the statement itself (Checked) when a message of the
// batch is no longer open — a terminal state with the intents of the
// others only would lose a marker (INV-8) — and write every message when
// all are.
func TestAll_R_M2_INV8_StatementsCheckEveryMessageBeforeCommit(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx := context.Background()
	insert(t, db, Pending, 1, 2, 3, 4, 5)
	insert(t, db, Dead, 9)
	for _, id := range []int64{3, 4, 9} {
		_, err := db.Exec(ctx, `INSERT INTO projection_pending (msg_id, flid, version) VALUES ($1, 7, 1)`, id)
		require.NoError(t, err)
	}
	send := func(b *pgx.Batch) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	}
	finish := func(ids ...int64) error {
		var rows []Finish
		var intents []OutboxRow
		for _, id := range ids {
			rows = append(rows, Finish{MsgID: id, State: Succeeded, At: t1})
			intents = append(intents, OutboxRow{Target: "mailbox", Pkey: fmt.Sprint(id), MsgID: id, At: t1})
		}
		b := &pgx.Batch{}
		QueueFinishAll(b, rows, intents)
		return send(b)
	}
	err := finish(1, 9, 2)
	require.True(t, Checked(err), "a terminal message in the batch fails the statement: %v", err)
	require.Equal(t, Pending, read(t, db, 1).State, "nothing of the batch written")
	require.Empty(t, outboxRows(t, db))
	require.NoError(t, finish(1, 2))
	require.Equal(t, Succeeded, read(t, db, 2).State)
	require.Equal(t, []string{"mailbox:1", "mailbox:2"}, outboxRows(t, db))

	var moved []AppliedAt
	apply := func(ids ...int64) error {
		var rows []Apply
		for _, id := range ids {
			rows = append(rows, Apply{MsgID: id, At: t1})
		}
		b := &pgx.Batch{}
		QueueApplyAll(b, rows, func(a []AppliedAt) { moved = a })
		return send(b)
	}
	err = apply(3, 4, 9)
	require.True(t, Checked(err), "a terminal message in the batch fails the statement: %v", err)
	err = apply(3, 5)
	require.True(t, Checked(err), "so does one with nothing pending: %v", err)
	require.Equal(t, Pending, read(t, db, 3).State, "nothing of the batch written")
	require.NoError(t, apply(3, 4))
	require.Len(t, moved, 2, "the moved messages are collected")
	require.Equal(t, Applied, read(t, db, 4).State)
	require.False(t, moved[0].Registered.IsZero())
}
