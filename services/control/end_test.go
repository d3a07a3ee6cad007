package control_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control"
)

// endAudit is one message_end_audit row.
type endAudit struct {
	ID               int64
	MsgID            int64
	Operator         string
	Reason           string
	PreviousState    string
	PreviousClass    *string
	PreviousAttempts int32
	PreviousReason   *string
	BackfillOutboxID int64
	At               time.Time
}

func (b *testBundle) endAudits(t *testing.T) []endAudit {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT id, msg_id, operator, reason, previous_state, previous_class, previous_attempts, previous_reason,
		       backfill_outbox_id, at
		FROM message_end_audit ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[endAudit])
	require.NoError(t, err)
	for i := range out {
		out[i].At = out[i].At.UTC()
	}
	return out
}

// mailboxIntent is the backfill intent of a message: its outbox row of
// target mailbox.
type mailboxIntent struct {
	ID          int64
	Pkey        string
	State       string
	Attempts    int
	NextAttempt time.Time
	Created     time.Time
}

func (b *testBundle) mailboxIntents(t *testing.T, msgID int64) []mailboxIntent {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT id, pkey, state, attempts, next_attempt_at, created_at FROM outbox
		WHERE target = 'mailbox' AND msg_id = $1 ORDER BY id`, msgID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[mailboxIntent])
	require.NoError(t, err)
	for i := range out {
		out[i].NextAttempt, out[i].Created = out[i].NextAttempt.UTC(), out[i].Created.UTC()
	}
	return out
}

// procRow is what EndMessage may change on a proc_state row.
type procRow struct {
	State         string
	Class         *string
	Reason        *string
	Attempts      int32
	NextAttemptAt *time.Time
	FinishedAt    *time.Time
	UpdatedAt     time.Time
}

func (b *testBundle) procRow(t *testing.T, msgID int64) procRow {
	t.Helper()
	var r procRow
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT state, error_class, reason, attempts, next_attempt_at, finished_at, updated_at
		FROM proc_state WHERE msg_id = $1`, msgID).
		Scan(&r.State, &r.Class, &r.Reason, &r.Attempts, &r.NextAttemptAt, &r.FinishedAt, &r.UpdatedAt))
	return r
}

// fifoHead is the processor's FIFO head: the smallest PENDING or FAILED
// mailbox ID (INV-3); 0 when none.
func (b *testBundle) fifoHead(t *testing.T) int64 {
	t.Helper()
	var id int64
	err := b.pool.QueryRow(context.Background(),
		`SELECT msg_id FROM proc_state WHERE state IN ('PENDING', 'FAILED') ORDER BY msg_id LIMIT 1`).Scan(&id)
	if err == pgx.ErrNoRows {
		return 0
	}
	require.NoError(t, err)
	return id
}

// TestAdmin_R_H3_EndMessageEndsAStuckPendingHead: the operator's escape
// hatch ends the FIFO head — PENDING, stuck in execution — as
// DEAD(OPERATOR) with the operator in its reason, writes its backfill
// intent exactly as the processor writes one (an outbox row of target
// mailbox, due now, waking the dispatcher) and an audit row with the
// previous state, drops the progress of its unfinished snapshot, and the
// next message becomes the head.
func TestAdmin_R_H3_EndMessageEndsAStuckPendingHead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	started := testNow.Add(-9 * time.Minute)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, attempts, processing_started_at, identity_key, sndr, msg_type, msg_styp,
	    seqn, raw, received_at, kafka_offset, registered_at, updated_at)
	  VALUES (10, 'PENDING', 2, $1, 'AODB|SCHD|DNLD|7', 'AODB', 'SCHD', 'DNLD', '7', '<MSG/>', $2, 1, $2, $1),
	         (11, 'PENDING', 0, NULL, NULL, NULL, NULL, NULL, NULL, '<MSG/>', $2, 2, $2, $2)`,
		started, testNow.Add(-time.Hour))
	b.exec(t, `INSERT INTO snapshot_progress (msg_id, started_at, next_record, batches, updated_at) VALUES (10, $1, 1000, 2, $1)`, started)
	require.Equal(t, int64(10), b.fifoHead(t))

	listen, err := pgx.Connect(context.Background(), b.dbURL)
	require.NoError(t, err)
	defer listen.Close(context.Background())
	_, err = listen.Exec(context.Background(), "LISTEN msgx_outbox")
	require.NoError(t, err)

	resp, err := client.EndMessage(callCtx(t), &controlv1.EndMessageRequest{
		MsgId: 10, Operator: " alice ", Reason: "snapshot decoder loops; AODB resends it after the fix",
	})
	require.NoError(t, err)

	intents := b.mailboxIntents(t, 10)
	require.Len(t, intents, 1, "one backfill intent, written with the terminal state (INV-8)")
	require.Equal(t, mailboxIntent{ID: intents[0].ID, Pkey: "10", State: "PENDING", Attempts: 0, NextAttempt: testNow, Created: testNow}, intents[0])

	wantReason := "ended by operator alice (was PENDING): snapshot decoder loops; AODB resends it after the fix"
	requireProtoEqual(t, &controlv1.EndMessageResponse{
		Message: &controlv1.Message{
			MsgId:               10,
			State:               controlv1.MessageState_MESSAGE_STATE_DEAD,
			ErrorClass:          controlv1.ErrorClass_ERROR_CLASS_OPERATOR,
			Reason:              wantReason,
			Attempts:            2,
			ProcessingStartedAt: timestamppb.New(started),
			IdentityKey:         "AODB|SCHD|DNLD|7",
			Sndr:                "AODB",
			Type:                "SCHD",
			Styp:                "DNLD",
			Seqn:                "7",
			ReceivedAt:          timestamppb.New(testNow.Add(-time.Hour)),
			RegisteredAt:        timestamppb.New(testNow.Add(-time.Hour)),
			FinishedAt:          timestamppb.New(testNow),
			UpdatedAt:           timestamppb.New(testNow),
			KafkaOffset:         1,
		},
		Audit: &controlv1.MessageEndAudit{
			Id:               resp.GetAudit().GetId(),
			MsgId:            10,
			Operator:         "alice",
			Reason:           "snapshot decoder loops; AODB resends it after the fix",
			PreviousState:    controlv1.MessageState_MESSAGE_STATE_PENDING,
			PreviousAttempts: 2,
			At:               timestamppb.New(testNow),
			BackfillOutboxId: intents[0].ID,
		},
	}, resp)

	require.Equal(t, []endAudit{{
		ID: resp.GetAudit().GetId(), MsgID: 10, Operator: "alice", Reason: "snapshot decoder loops; AODB resends it after the fix",
		PreviousState: "PENDING", PreviousAttempts: 2, BackfillOutboxID: intents[0].ID, At: testNow,
	}}, b.endAudits(t))
	require.Zero(t, b.count(t, `SELECT count(*) FROM snapshot_progress`), "the unfinished snapshot's progress is dropped")
	require.Equal(t, int64(11), b.fifoHead(t), "the next message is the head now")

	// GetMessage shows the same record.
	got, err := client.GetMessage(callCtx(t), &controlv1.GetMessageRequest{MsgId: 10})
	require.NoError(t, err)
	requireProtoEqual(t, resp.GetMessage(), got.GetMessage())

	// The outbox insert woke the dispatcher.
	nctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := listen.WaitForNotification(nctx)
	require.NoError(t, err)
	require.Equal(t, "msgx_outbox", n.Channel)
}

// TestAdmin_R_H3_EndMessageEndsFailedAndApplied: a FAILED head in backoff
// and an APPLIED message waiting for an acknowledgement are ended too; the
// audit keeps what they were (class, attempts, reason). An APPLIED
// message's pending projections stay for the acknowledgements to remove.
func TestAdmin_R_H3_EndMessageEndsFailedAndApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, error_class, reason, attempts, next_attempt_at, raw, kafka_offset, registered_at, applied_at, updated_at) VALUES
	  (20, 'FAILED',  'CODEC_ERROR', 'decoding FLOP: bad STOT', 3, $1,   '<MSG/>', 1, $2, NULL, $2),
	  (21, 'APPLIED', NULL,          NULL,                      0, NULL, '<MSG/>', 2, $2, $2,   $2)`,
		testNow.Add(8*time.Second), testNow.Add(-time.Minute))
	b.exec(t, `INSERT INTO projection_pending (msg_id, flid, version) VALUES (21, 15, 4)`)

	tests := []struct {
		id         int64
		prevState  controlv1.MessageState
		prevClass  controlv1.ErrorClass
		prevReason string
		attempts   int32
		wantReason string
	}{
		{20, controlv1.MessageState_MESSAGE_STATE_FAILED, controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR, "decoding FLOP: bad STOT", 3,
			"ended by operator bob (was FAILED CODEC_ERROR): blocks the FIFO; resent fixed by the AODB"},
		{21, controlv1.MessageState_MESSAGE_STATE_APPLIED, controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED, "", 0,
			"ended by operator bob (was APPLIED): blocks the FIFO; resent fixed by the AODB"},
	}
	for _, tc := range tests {
		resp, err := client.EndMessage(callCtx(t), &controlv1.EndMessageRequest{
			MsgId: tc.id, Operator: "bob", Reason: "blocks the FIFO; resent fixed by the AODB",
		})
		require.NoError(t, err, "msg %d", tc.id)
		intents := b.mailboxIntents(t, tc.id)
		require.Len(t, intents, 1)
		requireProtoEqual(t, &controlv1.MessageEndAudit{
			Id: resp.GetAudit().GetId(), MsgId: tc.id, Operator: "bob", Reason: "blocks the FIFO; resent fixed by the AODB",
			PreviousState: tc.prevState, PreviousClass: tc.prevClass, PreviousAttempts: tc.attempts,
			PreviousReason: tc.prevReason, At: timestamppb.New(testNow), BackfillOutboxId: intents[0].ID,
		}, resp.GetAudit())
		require.Equal(t, procRow{
			State: "DEAD", Class: ptr("OPERATOR"), Reason: ptr(tc.wantReason), Attempts: tc.attempts,
			FinishedAt: ptr(testNow), UpdatedAt: testNow,
		}, utcProcRow(b.procRow(t, tc.id)), "msg %d: next_attempt_at cleared, attempts kept", tc.id)
	}
	require.Len(t, b.endAudits(t), 2)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM projection_pending WHERE msg_id = 21`))
	require.Zero(t, b.fifoHead(t))
}

// TestAdmin_R_H3_EndMessageRefusals: a terminal message is refused with
// FAILED_PRECONDITION naming its state and pointing at replay; an unknown
// one is NOT_FOUND; operator, reason and a positive ID are required. A
// refused call changes nothing.
func TestAdmin_R_H3_EndMessageRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	finished := testNow.Add(-time.Hour)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, error_class, reason, raw, kafka_offset, registered_at, finished_at, updated_at) VALUES
	  (30, 'SUCCEEDED', NULL,        NULL,               '<MSG/>', 1, $1, $1, $1),
	  (31, 'SKIPPED',   NULL,        'duplicate-of:30',  '<MSG/>', 2, $1, $1, $1),
	  (32, 'DEAD',      'MALFORMED', 'not XML',          '<MSG/>', 3, $1, $1, $1),
	  (33, 'PENDING',   NULL,        NULL,               '<MSG/>', 4, $1, NULL, $1)`, finished)
	before := map[int64]procRow{}
	for id := int64(30); id <= 33; id++ {
		before[id] = b.procRow(t, id)
	}

	for _, tc := range []struct {
		id   int64
		want string
	}{
		{30, "message 30 is already SUCCEEDED since 2026-03-01T11:00:00Z"},
		{31, "message 31 is already SKIPPED since"},
		{32, "message 32 is already DEAD MALFORMED since"},
	} {
		_, err := client.EndMessage(callCtx(t), &controlv1.EndMessageRequest{MsgId: tc.id, Operator: "alice", Reason: "stuck"})
		requireCode(t, codes.FailedPrecondition, err)
		require.ErrorContains(t, err, tc.want)
		require.ErrorContains(t, err, "only an unfinished message (PENDING, FAILED, APPLIED) can be ended")
		require.ErrorContains(t, err, "use replay (msgxctl replay preview")
	}

	_, err := client.EndMessage(callCtx(t), &controlv1.EndMessageRequest{MsgId: 99, Operator: "alice", Reason: "stuck"})
	requireCode(t, codes.NotFound, err)
	require.ErrorContains(t, err, "message 99 not found")

	for _, tc := range []struct {
		name string
		req  *controlv1.EndMessageRequest
		want []string
	}{
		{"NoOperator", &controlv1.EndMessageRequest{MsgId: 33, Reason: "stuck"}, []string{"operator is required: who ends a message and why is recorded"}},
		{"BlankReason", &controlv1.EndMessageRequest{MsgId: 33, Operator: "alice", Reason: " \t"}, []string{"reason is required"}},
		{"ReasonTooLong", &controlv1.EndMessageRequest{MsgId: 33, Operator: "alice", Reason: strings.Repeat("x", 501)}, []string{"reason is longer than 500 characters"}},
		{"Nothing", &controlv1.EndMessageRequest{}, []string{"msg_id 0: must be a positive mailbox ID", "operator is required", "reason is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.EndMessage(callCtx(t), tc.req)
			requireCode(t, codes.InvalidArgument, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}

	for id, want := range before {
		require.Equal(t, want, b.procRow(t, id), "msg %d unchanged", id)
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM outbox`), "no backfill intent")
	require.Empty(t, b.endAudits(t), "no audit row")
}

// TestAdmin_R_H3_EndMessageWaitsForTheProcessorsTransaction: the
// processor's transaction on the message holds its row lock (its first
// statement updates the row). EndMessage waits for it and then acts on its
// outcome: a message the transaction finished is refused; one it left open
// (a snapshot batch committed, more to come) is ended, the batch's writes
// staying committed; a lock held past the wait ends the call with ABORTED.
func TestAdmin_R_H3_EndMessageWaitsForTheProcessorsTransaction(t *testing.T) {
	t.Parallel()
	// A query timeout of 3s makes the lock wait 1.5s: the other half is the
	// room the call's own statements have before the lock (a new pooled
	// connection under the race detector on a busy machine took more than
	// 500ms once).
	b := setup(t, func(c *control.Config) { c.QueryTimeout = 3 * time.Second })
	client := controlv1.NewAdminServiceClient(b.conn)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, registered_at) VALUES
	  (40, 'PENDING', '<MSG/>', 1, $1), (41, 'PENDING', '<MSG/>', 2, $1), (42, 'PENDING', '<MSG/>', 3, $1)`, testNow)

	// executorTx begins the processor's transaction on id: it locks the row.
	executorTx := func(t *testing.T, id int64) pgx.Tx {
		tx, err := b.pool.Begin(context.Background())
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		_, err = tx.Exec(context.Background(), `UPDATE proc_state SET processing_started_at = COALESCE(processing_started_at, $2) WHERE msg_id = $1`, id, testNow)
		require.NoError(t, err)
		return tx
	}
	// endWhileLocked calls EndMessage, waits until it waits for the row
	// lock, runs whileWaiting, and returns the call's outcome.
	endWhileLocked := func(t *testing.T, id int64, whileWaiting func()) (*controlv1.EndMessageResponse, error) {
		type result struct {
			resp *controlv1.EndMessageResponse
			err  error
		}
		done := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(authed(context.Background()), 10*time.Second)
			defer cancel()
			resp, err := client.EndMessage(ctx, &controlv1.EndMessageRequest{MsgId: id, Operator: "alice", Reason: "stuck"})
			done <- result{resp, err}
		}()
		require.Eventually(t, func() bool {
			return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
		}, 5*time.Second, 5*time.Millisecond, "EndMessage never waited for the row lock")
		whileWaiting()
		r := <-done
		return r.resp, r.err
	}

	t.Run("FinishedMeanwhileIsRefused", func(t *testing.T) {
		tx := executorTx(t, 40)
		_, err := endWhileLocked(t, 40, func() {
			_, err := tx.Exec(context.Background(), `
				WITH u AS (UPDATE proc_state SET state = 'SUCCEEDED', finished_at = $2, updated_at = $2 WHERE msg_id = $1 RETURNING msg_id)
				INSERT INTO outbox (target, pkey, msg_id) SELECT 'mailbox', msg_id::text, msg_id FROM u`, 40, testNow)
			require.NoError(t, err)
			require.NoError(t, tx.Commit(context.Background()))
		})
		requireCode(t, codes.FailedPrecondition, err)
		require.ErrorContains(t, err, "message 40 is already SUCCEEDED")
		require.Len(t, b.mailboxIntents(t, 40), 1, "only the processor's intent")
	})
	t.Run("BatchCommittedMeanwhileIsEnded", func(t *testing.T) {
		tx := executorTx(t, 41)
		resp, err := endWhileLocked(t, 41, func() {
			_, err := tx.Exec(context.Background(), `INSERT INTO flight (flid, state, state_version, last_msg_id, doc) VALUES (15, 'ACTIVE', 1, 41, '{}')`)
			require.NoError(t, err)
			_, err = tx.Exec(context.Background(), `INSERT INTO snapshot_progress (msg_id, started_at, next_record, batches, updated_at) VALUES (41, $1, 500, 1, $1)`, testNow)
			require.NoError(t, err)
			require.NoError(t, tx.Commit(context.Background()))
		})
		require.NoError(t, err)
		require.Equal(t, controlv1.MessageState_MESSAGE_STATE_DEAD, resp.GetMessage().GetState())
		require.Equal(t, controlv1.MessageState_MESSAGE_STATE_PENDING, resp.GetAudit().GetPreviousState())
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM flight WHERE last_msg_id = 41`), "the committed batch stays")
		require.Zero(t, b.count(t, `SELECT count(*) FROM snapshot_progress`))
	})
	t.Run("LockHeldTooLongIsAborted", func(t *testing.T) {
		executorTx(t, 42) // stays open until the subtest ends
		_, err := endWhileLocked(t, 42, func() {})
		requireCode(t, codes.Aborted, err)
		require.ErrorContains(t, err, "message 42 is being executed by the processor right now (its row stayed locked for 1.5s); retry")
		require.Equal(t, "PENDING", b.procRow(t, 42).State)
		require.Empty(t, b.mailboxIntents(t, 42))
	})
}

func utcProcRow(r procRow) procRow {
	utc := func(p *time.Time) *time.Time {
		if p == nil {
			return nil
		}
		v := p.UTC()
		return &v
	}
	r.NextAttemptAt, r.FinishedAt, r.UpdatedAt = utc(r.NextAttemptAt), utc(r.FinishedAt), r.UpdatedAt.UTC()
	return r
}
