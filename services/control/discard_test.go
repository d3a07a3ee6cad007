package control_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// discardAudit is one outbox_discard_audit row.
type discardAudit struct {
	Action, Operator, Reason string
	IDs                      []int64
	Principal, Peer          string
}

func (b *testBundle) discardAudits(t *testing.T) []discardAudit {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT action, operator, reason, outbox_ids, principal, peer FROM outbox_discard_audit ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []discardAudit
	for rows.Next() {
		var a discardAudit
		require.NoError(t, rows.Scan(&a.Action, &a.Operator, &a.Reason, &a.IDs, &a.Principal, &a.Peer))
		host, _, err := net.SplitHostPort(a.Peer)
		require.NoError(t, err, "peer %q is the connection's address", a.Peer)
		a.Peer = host
		out = append(out, a)
	}
	require.NoError(t, rows.Err())
	return out
}

// countState is the number of outbox rows in state (what msgx_outbox_dead
// and msgx_backfill_abandoned count).
func (b *testBundle) countState(t *testing.T, state, target string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE state=$1 AND ($2 = '' OR target=$2)`, state, target).Scan(&n))
	return n
}

// backfill reads a message's backfill finish and outcome.
func (b *testBundle) backfill(t *testing.T, msgID int64) (*time.Time, *string) {
	t.Helper()
	var at *time.Time
	var outcome *string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT backfilled_at, backfill_outcome FROM proc_state WHERE msg_id=$1`, msgID).Scan(&at, &outcome))
	return at, outcome
}

// TestAdmin_R_D2_R_F1_R_I2_DiscardOutbox: DEAD rows nobody needs (a
// COUTMSGS request, a marker that gave up) move to DISCARDED and leave the
// dead count MsgxDeadLetters reads; a discarded marker finishes its
// message's backfill so the unmarked backlog lets it go; every call is
// audited with operator, reason, principal and peer; a read credential is
// refused and changes nothing.
func TestAdmin_R_D2_R_F1_R_I2_DiscardOutbox(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	client := controlv1.NewAdminServiceClient(b.conn)
	created := testNow.Add(-time.Hour)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, finished_at) VALUES (42, 'SUCCEEDED', '<MSG/>', 1, $1)`, created)
	b.exec(t, `INSERT INTO outbox (id, target, pkey, payload, msg_id, state, attempts, next_attempt_at, last_error, outcome, created_at) VALUES
	  (1, 'coutmsgs', 'RQFD', 'p', NULL, 'DEAD',    10, $1, 'mysql: refused', NULL,      $1),
	  (2, 'mailbox',  '42',   NULL, 42,  'DEAD',    10, $1, 'mysql: down',    'gave-up', $1),
	  (3, 'msg',      '15',   'p',  NULL, 'PENDING', 1, $1, NULL,             NULL,      $1),
	  (4, 'schd',     '16',   'p',  NULL, 'DEAD',    10, $1, 'kafka: down',   NULL,      $1),
	  (5, 'schd',     '17',   'p',  NULL, 'DEAD',    10, $1, 'kafka: down',   NULL,      $1)`, created)

	t.Run("ReadRoleRefused", func(t *testing.T) {
		_, err := client.DiscardOutbox(as(t, "viewer"), &controlv1.DiscardOutboxRequest{Ids: []int64{1}, Operator: "viewer", Reason: "not needed"})
		requireCode(t, codes.PermissionDenied, err)
		require.Contains(t, err.Error(), "needs role operate")
		require.Equal(t, 4, b.countState(t, "DEAD", ""))
		require.Empty(t, b.discardAudits(t), "a refused discard records nothing")
	})

	t.Run("RefusedWithoutOperatorReasonOrSelection", func(t *testing.T) {
		for _, tc := range []struct {
			req  *controlv1.DiscardOutboxRequest
			want string
		}{
			{&controlv1.DiscardOutboxRequest{Ids: []int64{1}, Reason: "x"}, "operator: required"},
			{&controlv1.DiscardOutboxRequest{Ids: []int64{1}, Operator: "alice"}, "reason: required"},
			{&controlv1.DiscardOutboxRequest{Operator: "alice", Reason: "x"}, "ids or target"},
			{&controlv1.DiscardOutboxRequest{Ids: []int64{1}, Target: "schd", Operator: "alice", Reason: "x"}, "not both"},
			{&controlv1.DiscardOutboxRequest{Ids: []int64{-1}, Operator: "alice", Reason: "x"}, "not a positive outbox ID"},
		} {
			_, err := client.DiscardOutbox(as(t, "alice"), tc.req)
			requireCode(t, codes.InvalidArgument, err)
			require.ErrorContains(t, err, tc.want)
		}
		require.Empty(t, b.discardAudits(t))
	})

	t.Run("ByIDsDiscardsDeadRowsOnly", func(t *testing.T) {
		resp, err := client.DiscardOutbox(as(t, "alice"), &controlv1.DiscardOutboxRequest{
			Ids: []int64{2, 1, 3, 99, 1}, Operator: "someone-else", Reason: " request no longer needed ",
		})
		require.NoError(t, err)
		requireProtoEqual(t, &controlv1.DiscardOutboxResponse{
			Discarded: 2, DiscardedIds: []int64{1, 2}, SkippedIds: []int64{3, 99}, AuditId: resp.GetAuditId(),
		}, resp)
		for _, id := range []int64{1, 2} {
			r := b.outboxRow(t, id)
			require.Equal(t, "DISCARDED", r.State)
			require.NotNil(t, r.LastError, "the last error is kept for the record")
		}
		require.Equal(t, "gave-up", *b.outboxRow(t, 2).Outcome)
		require.Equal(t, "PENDING", b.outboxRow(t, 3).State)
		require.Equal(t, 2, b.countState(t, "DEAD", ""), "only the schd rows stay dead-lettered")
		at, outcome := b.backfill(t, 42)
		require.NotNil(t, at, "a discarded marker finishes the backfill")
		require.Equal(t, testNow, at.UTC())
		require.Equal(t, "discarded", *outcome)
		backlog, err := client.GetBacklog(as(t, "alice"), &controlv1.GetBacklogRequest{})
		require.NoError(t, err)
		require.Zero(t, backlog.GetUnmarkedTerminal())
		require.Equal(t, []discardAudit{{Action: "discard", Operator: "someone-else", Reason: "request no longer needed",
			IDs: []int64{1, 2}, Principal: "alice", Peer: "127.0.0.1"}}, b.discardAudits(t))
	})

	t.Run("ByTarget", func(t *testing.T) {
		resp, err := client.DiscardOutbox(as(t, "alice"), &controlv1.DiscardOutboxRequest{Target: "schd", Operator: "bob", Reason: "flights gone"})
		require.NoError(t, err)
		require.Equal(t, []int64{4, 5}, resp.GetDiscardedIds())
		require.Empty(t, resp.GetSkippedIds())
		require.Zero(t, b.countState(t, "DEAD", ""), "the dead-letter queue is empty")
		list, err := client.ListOutbox(as(t, "viewer"), &controlv1.ListOutboxRequest{State: controlv1.OutboxState_OUTBOX_STATE_DISCARDED})
		require.NoError(t, err)
		require.Len(t, list.GetEntries(), 4)
		audits := b.discardAudits(t)
		require.Len(t, audits, 2)
		require.Equal(t, []int64{4, 5}, audits[1].IDs)
	})
}

// TestAdmin_R_D4_R_I2_AcknowledgeBackfills: an acknowledged abandoned
// backfill leaves the abandoned list and the count MsgxBackfillAbandoned
// reads; its message's backfill stays finished as abandoned; only
// ABANDONED mailbox rows are acknowledged; the call is audited and needs
// the operate role. A re-queued abandoned backfill is unfinished again.
func TestAdmin_R_D4_R_I2_AcknowledgeBackfills(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	client := controlv1.NewAdminServiceClient(b.conn)
	created, abandoned := testNow.Add(-time.Hour), testNow.Add(-time.Minute)
	for _, id := range []int64{41, 43, 44} {
		b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, finished_at, backfilled_at, backfill_outcome)
		  VALUES ($1, 'SUCCEEDED', '<MSG/>', $1, $2, $3, 'abandoned')`, id, created, abandoned)
	}
	b.exec(t, `INSERT INTO outbox (id, target, pkey, msg_id, state, attempts, next_attempt_at, outcome, created_at, sent_at) VALUES
	  (1, 'mailbox', '41', 41, 'ABANDONED', 1,  $1, 'row-missing', $1, $2),
	  (2, 'mailbox', '42', 42, 'DEAD',      10, $1, 'gave-up',     $1, NULL),
	  (3, 'mailbox', '43', 43, 'ABANDONED', 1,  $1, 'row-missing', $1, $2),
	  (4, 'mailbox', '44', 44, 'ABANDONED', 1,  $1, 'row-missing', $1, $2)`, created, abandoned)

	_, err := client.AcknowledgeBackfills(as(t, "viewer"), &controlv1.AcknowledgeBackfillsRequest{Ids: []int64{1}, Operator: "v", Reason: "seen"})
	requireCode(t, codes.PermissionDenied, err)
	_, err = client.AcknowledgeBackfills(as(t, "alice"), &controlv1.AcknowledgeBackfillsRequest{Operator: "alice", Reason: "seen"})
	requireCode(t, codes.InvalidArgument, err)
	require.ErrorContains(t, err, "ids: required")
	require.Equal(t, 3, b.countState(t, "ABANDONED", "mailbox"))

	resp, err := client.AcknowledgeBackfills(as(t, "alice"), &controlv1.AcknowledgeBackfillsRequest{
		Ids: []int64{3, 1, 2}, Operator: "alice", Reason: "rows purged by the AODB housekeeping",
	})
	require.NoError(t, err)
	requireProtoEqual(t, &controlv1.AcknowledgeBackfillsResponse{
		Acknowledged: 2, AcknowledgedIds: []int64{1, 3}, SkippedIds: []int64{2}, AuditId: resp.GetAuditId(),
	}, resp)
	require.Equal(t, 1, b.countState(t, "ABANDONED", "mailbox"), "only the unacknowledged one is still counted")
	require.Equal(t, "DEAD", b.outboxRow(t, 2).State, "a DEAD marker is not an abandoned backfill")
	require.Equal(t, "row-missing", *b.outboxRow(t, 1).Outcome)
	at, outcome := b.backfill(t, 41)
	require.Equal(t, abandoned, at.UTC())
	require.Equal(t, "abandoned", *outcome)
	list, err := client.ListAbandonedBackfills(as(t, "viewer"), &controlv1.ListAbandonedBackfillsRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetEntries(), 1)
	require.Equal(t, int64(4), list.GetEntries()[0].GetId())
	require.Equal(t, []discardAudit{{Action: "acknowledge", Operator: "alice", Reason: "rows purged by the AODB housekeeping",
		IDs: []int64{1, 3}, Principal: "alice", Peer: "127.0.0.1"}}, b.discardAudits(t))

	// Re-queueing the last one (its row was restored) reopens its backfill:
	// it is unmarked again until the dispatcher records the marker.
	_, err = client.RequeueOutbox(as(t, "alice"), &controlv1.RequeueOutboxRequest{
		Ids: []int64{4}, State: controlv1.OutboxState_OUTBOX_STATE_ABANDONED, Operator: "alice", Reason: "row restored",
	})
	require.NoError(t, err)
	at, outcome = b.backfill(t, 44)
	require.Nil(t, at)
	require.Nil(t, outcome)
	backlog, err := client.GetBacklog(as(t, "alice"), &controlv1.GetBacklogRequest{})
	require.NoError(t, err)
	require.Equal(t, int64(1), backlog.GetUnmarkedTerminal())
}

// TestAdmin_R_L2_DiscardedFlightStateRowReleasesItsMessage: a message whose
// flight-state row was dead-lettered waits APPLIED for a projection that
// will never come; discarding the row releases that wait (its other
// flights still wait for theirs), so the processor's self-check finishes
// the message instead of leaving it APPLIED for ever.
func TestAdmin_R_L2_DiscardedFlightStateRowReleasesItsMessage(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	client := controlv1.NewAdminServiceClient(b.conn)
	created := testNow.Add(-time.Hour)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset) VALUES (50, 'APPLIED', '<MSG/>', 1)`)
	b.exec(t, `INSERT INTO projection_pending (msg_id, flid, version) VALUES (50, 7004, 3), (50, 7005, 2)`)
	b.exec(t, `INSERT INTO outbox (id, target, pkey, payload, msg_id, state, attempts, next_attempt_at, last_error, created_at) VALUES
	  (10, 'flight-state', '7004', 'p', 50, 'DEAD', 1, $1, 'MESSAGE_TOO_LARGE', $1),
	  (11, 'msg',          '7004', 'p', 50, 'DEAD', 1, $1, 'MESSAGE_TOO_LARGE', $1)`, created)
	_, err := client.DiscardOutbox(as(t, "alice"), &controlv1.DiscardOutboxRequest{Ids: []int64{10, 11}, Operator: "alice", Reason: "too large for ever"})
	require.NoError(t, err)
	var flids []int64
	rows, err := b.pool.Query(context.Background(), `SELECT flid FROM projection_pending WHERE msg_id=50 ORDER BY flid`)
	require.NoError(t, err)
	for rows.Next() {
		var f int64
		require.NoError(t, rows.Scan(&f))
		flids = append(flids, f)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{7005}, flids, "the discarded flight's wait is released, the other flight's stays")
}
