package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// auditRow is one outbox_requeue_audit row.
type auditRow struct {
	ID       int64
	At       time.Time
	Operator string
	Reason   string
	IDs      []int64
}

func (b *testBundle) audits(t *testing.T) []auditRow {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT id, at, operator, reason, outbox_ids FROM outbox_requeue_audit ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[auditRow])
	require.NoError(t, err)
	return out
}

// outboxState is what a re-queue changes on an outbox row.
type outboxState struct {
	State       string
	Attempts    int
	NextAttempt time.Time
	Outcome     *string
	SentAt      *time.Time
	LastError   *string
}

func (b *testBundle) outboxRow(t *testing.T, id int64) outboxState {
	t.Helper()
	var r outboxState
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT state, attempts, next_attempt_at, outcome, sent_at, last_error FROM outbox WHERE id=$1`, id).
		Scan(&r.State, &r.Attempts, &r.NextAttempt, &r.Outcome, &r.SentAt, &r.LastError))
	return r
}

// TestAdmin_R_D2_R_D4_RequeueOutbox: DEAD rows (the dead-letter queue, and
// mailbox markers that gave up) go back to PENDING with attempts reset and
// next_attempt_at now; every call is audited with operator and reason, and
// refused without them (R-D2, R-D4 "operator can resume", R-F1).
//
// Validation 001§6 INV-7 "回填四种结果"; 002§8 "回填四种结果".
func TestAdmin_R_D2_R_D4_RequeueOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	created := testNow.Add(-time.Hour)
	b.exec(t, `INSERT INTO outbox (id, target, pkey, payload, msg_id, state, attempts, next_attempt_at, last_error, outcome, created_at, sent_at) VALUES
	  (1, 'msg',     '15', 'p', 42,   'DEAD',      10, $1, 'kafka: too large',          NULL,          $1, NULL),
	  (2, 'mailbox', '42', NULL, 42,  'DEAD',      10, $1, 'mysql: connection refused', 'gave-up',     $1, NULL),
	  (3, 'msg',     '16', 'p', 43,   'PENDING',   2,  $1, 'kafka: timeout',            NULL,          $1, NULL),
	  (4, 'schd',    '17', NULL, 44,  'DEAD',      10, $1, 'kafka: down',               NULL,          $1, NULL),
	  (5, 'mailbox', '45', NULL, 45,  'ABANDONED', 1,  $1, NULL,                        'row-missing', $1, $2),
	  (6, 'msg',     '15', 'p', 42,   'SENT',      1,  $1, NULL,                        NULL,          $1, $2)`,
		created, testNow.Add(-time.Minute))
	before := map[int64]outboxState{}
	for id := int64(1); id <= 6; id++ {
		before[id] = b.outboxRow(t, id)
	}

	t.Run("RefusedWithoutOperatorReasonOrSelection", func(t *testing.T) {
		tests := []struct {
			name string
			req  *controlv1.RequeueOutboxRequest
			want string
		}{
			{"NoOperator", &controlv1.RequeueOutboxRequest{Ids: []int64{1}, Reason: "fixed"}, "operator: required"},
			{"BlankOperator", &controlv1.RequeueOutboxRequest{Ids: []int64{1}, Operator: "  ", Reason: "fixed"}, "operator: required"},
			{"NoReason", &controlv1.RequeueOutboxRequest{Ids: []int64{1}, Operator: "alice"}, "reason: required"},
			{"NeitherIDsNorTarget", &controlv1.RequeueOutboxRequest{Operator: "alice", Reason: "fixed"}, "ids or target"},
			{"BothIDsAndTarget", &controlv1.RequeueOutboxRequest{Ids: []int64{1}, Target: "msg", Operator: "alice", Reason: "fixed"}, "not both"},
			{"NonPositiveID", &controlv1.RequeueOutboxRequest{Ids: []int64{0}, Operator: "alice", Reason: "fixed"}, "not a positive outbox ID"},
			{"SentRowsAreNotRequeueable", &controlv1.RequeueOutboxRequest{Target: "msg", State: controlv1.OutboxState_OUTBOX_STATE_SENT, Operator: "alice", Reason: "fixed"}, "only DEAD or ABANDONED"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := client.RequeueOutbox(callCtx(t), tc.req)
				requireCode(t, codes.InvalidArgument, err)
				require.ErrorContains(t, err, tc.want)
			})
		}
		_, err := client.RequeueOutbox(callCtx(t), &controlv1.RequeueOutboxRequest{})
		require.ErrorContains(t, err, "operator: required")
		require.ErrorContains(t, err, "reason: required", "every problem is reported at once")
		for id, want := range before {
			requireRowEqual(t, want, b.outboxRow(t, id))
		}
		require.Empty(t, b.audits(t), "a refused call changes nothing")
	})

	t.Run("ByIDsMovesDeadRowsOnly", func(t *testing.T) {
		// The dispatcher is woken: an UPDATE fires no insert trigger.
		listen, err := pgx.Connect(context.Background(), b.dbURL)
		require.NoError(t, err)
		defer listen.Close(context.Background())
		_, err = listen.Exec(context.Background(), "LISTEN msgx_outbox")
		require.NoError(t, err)

		resp, err := client.RequeueOutbox(callCtx(t), &controlv1.RequeueOutboxRequest{
			Ids: []int64{2, 1, 3, 6, 99, 1}, Operator: "alice", Reason: " broker limit raised ",
		})
		require.NoError(t, err)
		requireProtoEqual(t, &controlv1.RequeueOutboxResponse{
			Requeued: 2, RequeuedIds: []int64{1, 2}, SkippedIds: []int64{3, 6, 99}, AuditId: resp.GetAuditId(),
		}, resp)
		for _, id := range []int64{1, 2} {
			r := b.outboxRow(t, id)
			require.Equal(t, "PENDING", r.State)
			require.Zero(t, r.Attempts)
			require.Equal(t, testNow, r.NextAttempt.UTC())
			require.Nil(t, r.Outcome, "the gave-up outcome is cleared")
			require.Equal(t, before[id].LastError, r.LastError, "the last error is kept for the record")
		}
		requireRowEqual(t, before[3], b.outboxRow(t, 3))
		requireRowEqual(t, before[6], b.outboxRow(t, 6))
		require.Equal(t, []auditRow{{ID: resp.GetAuditId(), At: testNow, Operator: "alice", Reason: "broker limit raised", IDs: []int64{1, 2}}}, utcAudits(b.audits(t)))

		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := listen.WaitForNotification(wctx)
		require.NoError(t, err)
		require.Equal(t, "msgx_outbox", n.Channel)
	})

	t.Run("ByTarget", func(t *testing.T) {
		resp, err := client.RequeueOutbox(callCtx(t), &controlv1.RequeueOutboxRequest{Target: "schd", Operator: "bob", Reason: "schd topic recreated"})
		require.NoError(t, err)
		require.Equal(t, []int64{4}, resp.GetRequeuedIds())
		require.Empty(t, resp.GetSkippedIds())
		require.Equal(t, "PENDING", b.outboxRow(t, 4).State)
	})

	t.Run("AbandonedBackfillOnlyWhenAskedFor", func(t *testing.T) {
		resp, err := client.RequeueOutbox(callCtx(t), &controlv1.RequeueOutboxRequest{Target: "mailbox", Operator: "bob", Reason: "row restored"})
		require.NoError(t, err)
		require.Zero(t, resp.GetRequeued(), "DEAD is the default state; the abandoned row stays")
		require.Equal(t, "ABANDONED", b.outboxRow(t, 5).State)

		resp, err = client.RequeueOutbox(callCtx(t), &controlv1.RequeueOutboxRequest{
			Ids: []int64{5}, State: controlv1.OutboxState_OUTBOX_STATE_ABANDONED, Operator: "bob", Reason: "row restored from backup",
		})
		require.NoError(t, err)
		require.Equal(t, []int64{5}, resp.GetRequeuedIds())
		r := b.outboxRow(t, 5)
		require.Equal(t, "PENDING", r.State)
		require.Nil(t, r.SentAt)
		require.Nil(t, r.Outcome)
		// Every call is audited, the one that moved nothing too.
		audits := b.audits(t)
		require.Len(t, audits, 4)
		require.Empty(t, audits[2].IDs)
		require.Equal(t, []int64{5}, audits[3].IDs)
	})
}

// TestAdmin_R_D4_ListAbandonedBackfills: the abandoned list (mailbox rows
// that were missing) with its times and outcome, paged by ID (R-D4, R-F1).
//
// Validation 001§6 INV-7 "回填四种结果"; 002§8 "回填四种结果".
//
// Also names C-16 (the abandoned list stays queryable), CLM-4.
func TestAdmin_R_D4_ListAbandonedBackfills(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	created, abandoned := testNow.Add(-time.Hour), testNow.Add(-time.Minute)
	b.exec(t, `INSERT INTO outbox (id, target, pkey, msg_id, state, attempts, next_attempt_at, last_error, outcome, created_at, sent_at) VALUES
	  (1, 'mailbox', '41', 41, 'ABANDONED', 1, $1, NULL,            'row-missing', $1, $2),
	  (2, 'mailbox', '42', 42, 'DEAD',      10, $1, 'mysql: down',  'gave-up',     $1, NULL),
	  (3, 'mailbox', '43', 43, 'ABANDONED', 3, $1, 'mysql: timeout', 'row-missing', $1, $2),
	  (4, 'msg',     '15', 44, 'ABANDONED', 1, $1, NULL,            NULL,          $1, $2),
	  (5, 'mailbox', '45', 45, 'SENT',      1, $1, NULL,            'written',     $1, $2),
	  (6, 'mailbox', '46', 46, 'ABANDONED', 1, $1, NULL,            'row-missing', $1, $2)`, created, abandoned)

	ids := func(r *controlv1.ListAbandonedBackfillsResponse) []int64 {
		var out []int64
		for _, e := range r.GetEntries() {
			out = append(out, e.GetId())
		}
		return out
	}
	tests := []struct {
		name     string
		req      *controlv1.ListAbandonedBackfillsRequest
		wantIDs  []int64
		wantNext int64
	}{
		{name: "OnlyAbandonedMailboxRows", req: &controlv1.ListAbandonedBackfillsRequest{}, wantIDs: []int64{1, 3, 6}},
		{name: "FirstPage", req: &controlv1.ListAbandonedBackfillsRequest{Limit: 2}, wantIDs: []int64{1, 3}, wantNext: 3},
		{name: "LastPage", req: &controlv1.ListAbandonedBackfillsRequest{Limit: 2, AfterId: 3}, wantIDs: []int64{6}},
		{name: "Empty", req: &controlv1.ListAbandonedBackfillsRequest{AfterId: 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := client.ListAbandonedBackfills(callCtx(t), tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.wantIDs, ids(resp))
			require.Equal(t, tc.wantNext, resp.GetNextAfterId())
		})
	}
	t.Run("EntryCarriesTheBackfillsRecord", func(t *testing.T) {
		t.Parallel()
		resp, err := client.ListAbandonedBackfills(callCtx(t), &controlv1.ListAbandonedBackfillsRequest{AfterId: 1, Limit: 1})
		require.NoError(t, err)
		requireProtoEqual(t, &controlv1.AbandonedBackfill{
			Id: 3, MsgId: 43, CreatedAt: timestamppb.New(created), AbandonedAt: timestamppb.New(abandoned),
			Outcome: "row-missing", Attempts: 3, LastError: "mysql: timeout",
		}, resp.GetEntries()[0])
	})
	t.Run("InvalidRequests", func(t *testing.T) {
		t.Parallel()
		for _, req := range []*controlv1.ListAbandonedBackfillsRequest{{Limit: -1}, {AfterId: -1}} {
			_, err := client.ListAbandonedBackfills(callCtx(t), req)
			requireCode(t, codes.InvalidArgument, err)
		}
	})
}

func requireRowEqual(t *testing.T, want, got outboxState) {
	t.Helper()
	require.Equal(t, want.State, got.State)
	require.Equal(t, want.Attempts, got.Attempts)
	require.True(t, want.NextAttempt.Equal(got.NextAttempt))
	require.Equal(t, want.Outcome, got.Outcome)
}

func utcAudits(in []auditRow) []auditRow {
	for i := range in {
		in[i].At = in[i].At.UTC()
	}
	return in
}
