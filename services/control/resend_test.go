package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestAdmin_R_M1_ResendOutboxSendsAWindowAgain: after the broker lost
// records it had acknowledged (an unclean leader election, a restored
// broker), an operator sends a Kafka target's delivered rows of a time
// window again. The SENT rows sent in [sent_since, sent_until) go back to
// PENDING in the dispatcher's retry lane, with attempts, outcome and
// sent_at cleared; rows outside the window, of another target or in
// another state stay as they are; mailbox markers and COUTMSGS requests
// are refused; every call is audited with its target and window, and a
// repeated call finds nothing to move twice. A dry run counts the window
// and moves and records nothing.
func TestAdmin_R_M1_ResendOutboxSendsAWindowAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	at := func(ago time.Duration) time.Time { return testNow.Add(-ago) }
	b.exec(t, `INSERT INTO outbox (id, target, pkey, payload, msg_id, state, attempts, next_attempt_at, outcome, created_at, sent_at) VALUES
	  (1, 'msg',          '15', 'p', 41, 'SENT', 1,  $1, NULL,       $1, $1),
	  (2, 'msg',          '15', 'p', 42, 'SENT', 3,  $2, NULL,       $2, $2),
	  (3, 'msg',          '16', 'p', 43, 'SENT', 1,  $3, NULL,       $3, $3),
	  (4, 'flight-state', '16', 'p', 43, 'SENT', 1,  $3, NULL,       $3, $3),
	  (5, 'mailbox',      '43', NULL, 43, 'SENT', 1, $3, 'written',  $3, $3),
	  (6, 'msg',          '17', 'p', 44, 'DEAD', 10, $3, NULL,       $3, NULL),
	  (7, 'msg',          '18', 'p', 45, 'SENT', 1,  $4, NULL,       $4, $4),
	  (8, 'schd',         '16', 'p', 43, 'SENT', 1,  $3, 'produced', $3, $3)`,
		at(10*time.Minute), at(5*time.Minute), at(time.Minute), testNow)
	audits := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_requeue_audit`).Scan(&n))
		return n
	}
	state := func(id int64) (st string, retry bool) {
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state, retry FROM outbox WHERE id = $1`, id).Scan(&st, &retry))
		return st, retry
	}
	since := timestamppb.New(at(6 * time.Minute))

	t.Run("Refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			req  *controlv1.ResendOutboxRequest
			want string
		}{
			{"NoOperator", &controlv1.ResendOutboxRequest{Target: "msg", SentSince: since, Reason: "r"}, "operator: required"},
			{"NoReason", &controlv1.ResendOutboxRequest{Target: "msg", SentSince: since, Operator: "alice"}, "reason: required"},
			{"NoTarget", &controlv1.ResendOutboxRequest{SentSince: since, Operator: "alice", Reason: "r"}, "target: required"},
			{"Mailbox", &controlv1.ResendOutboxRequest{Target: "mailbox", SentSince: since, Operator: "alice", Reason: "r"}, `target "mailbox": only the Kafka targets`},
			{"Coutmsgs", &controlv1.ResendOutboxRequest{Target: "coutmsgs", SentSince: since, Operator: "alice", Reason: "r"}, `target "coutmsgs": only the Kafka targets`},
			{"NoSince", &controlv1.ResendOutboxRequest{Target: "msg", Operator: "alice", Reason: "r"}, "sent_since: required"},
			{"EmptyWindow", &controlv1.ResendOutboxRequest{Target: "msg", SentSince: since, SentUntil: since, Operator: "alice", Reason: "r"}, "must be before sent_until"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := client.ResendOutbox(callCtx(t), tc.req)
				requireCode(t, codes.InvalidArgument, err)
				require.ErrorContains(t, err, tc.want)
			})
		}
		require.Zero(t, audits(), "a refused call moves and records nothing")
		st, _ := state(5)
		require.Equal(t, "SENT", st)
	})

	t.Run("DryRunCountsAndMovesNothing", func(t *testing.T) {
		resp, err := client.ResendOutbox(callCtx(t), &controlv1.ResendOutboxRequest{
			Target: "msg", SentSince: since, Operator: "alice", Reason: "how much", DryRun: true})
		require.NoError(t, err)
		require.Equal(t, int64(2), resp.GetMatched())
		require.Zero(t, resp.GetResent())
		require.Zero(t, resp.GetAuditId())
		require.Zero(t, audits(), "a dry run records nothing")
		for _, id := range []int64{2, 3} {
			st, _ := state(id)
			require.Equal(t, "SENT", st, "a dry run moves nothing")
		}
	})

	t.Run("TheWindowGoesBackToTheRetryLane", func(t *testing.T) {
		resp, err := client.ResendOutbox(callCtx(t), &controlv1.ResendOutboxRequest{
			Target: "msg", SentSince: since, Operator: "alice", Reason: "unclean leader election of broker 2 at 10:04"})
		require.NoError(t, err)
		require.Equal(t, int64(2), resp.GetResent(), "rows 2 and 3: row 1 before the window, row 7 at its end (exclusive), row 6 DEAD")
		require.Equal(t, int64(2), resp.GetFirstId())
		require.Equal(t, int64(3), resp.GetLastId())
		require.False(t, resp.GetMore())
		require.True(t, resp.GetSentUntil().AsTime().Equal(testNow), "the window ends at the call's time")
		for _, id := range []int64{2, 3} {
			r := b.outboxRow(t, id)
			require.Equal(t, "PENDING", r.State)
			require.Zero(t, r.Attempts)
			require.Nil(t, r.SentAt)
			require.True(t, r.NextAttempt.Equal(testNow))
			_, retry := state(id)
			require.True(t, retry, "a re-sent row joins the retry lane, below the dispatcher's fresh-lane floor")
		}
		for id, want := range map[int64]string{1: "SENT", 4: "SENT", 5: "SENT", 6: "DEAD", 7: "SENT", 8: "SENT"} {
			st, _ := state(id)
			require.Equal(t, want, st, "row %d", id)
		}

		var (
			action, target, operator, reason string
			ids                              []int64
			from, until                      time.Time
		)
		require.NoError(t, b.pool.QueryRow(context.Background(),
			`SELECT action, target, operator, reason, outbox_ids, sent_since, sent_until FROM outbox_requeue_audit WHERE id = $1`, resp.GetAuditId()).
			Scan(&action, &target, &operator, &reason, &ids, &from, &until))
		require.Equal(t, []any{"resend", "msg", "alice", "unclean leader election of broker 2 at 10:04", []int64{2, 3}},
			[]any{action, target, operator, reason, ids})
		require.True(t, from.Equal(since.AsTime()) && until.Equal(testNow), "the audit keeps the window: %s – %s", from, until)

		again, err := client.ResendOutbox(callCtx(t), &controlv1.ResendOutboxRequest{
			Target: "msg", SentSince: since, SentUntil: resp.GetSentUntil(), Operator: "alice", Reason: "again"})
		require.NoError(t, err)
		require.Zero(t, again.GetResent(), "what one call moved is not moved twice")
		require.Equal(t, 2, audits(), "a call that moved nothing is audited too")
	})

	t.Run("TheAuditListingShowsTheWindow", func(t *testing.T) {
		resp, err := controlv1.NewInspectServiceClient(b.conn).ListAudit(callCtx(t), &controlv1.ListAuditRequest{})
		require.NoError(t, err)
		var found bool
		for _, e := range resp.GetEntries() {
			if e.GetAction() != "resend" || e.GetReason() != "unclean leader election of broker 2 at 10:04" {
				continue
			}
			found = true
			require.Equal(t, "outbox msg: 2 rows 2…3", e.GetSubject())
			require.Contains(t, e.GetDetailJson(), `"target": "msg"`)
			require.Contains(t, e.GetDetailJson(), `"sent_since": "`)
		}
		require.True(t, found, "entries: %v", resp.GetEntries())
	})
}
