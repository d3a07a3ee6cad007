package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMsgxctl_R_F2_OutboxRequeue: "outbox requeue" re-queues dead-letter
// rows by ID or target with operator and reason, reports skipped IDs, and
// refuses an incomplete command line before calling (R-F2, R-D2, R-D4).
func TestMsgxctl_R_F2_OutboxRequeue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	state := func(id int64) (st string, attempts int) {
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state, attempts FROM outbox WHERE id=$1`, id).Scan(&st, &attempts))
		return st, attempts
	}

	t.Run("ByIDTable", func(t *testing.T) {
		r := b.run(t, "outbox", "requeue", "--id", "2", "--id", "99", "--operator", "alice", "--reason", "mysql is back")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "requeued 1 outbox row(s) (audit 1)\nrequeued: 2\nskipped (missing, or not DEAD): 99\n", r.stdout)
		st, attempts := state(2)
		require.Equal(t, "PENDING", st)
		require.Zero(t, attempts)
		var operator, reason string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT operator, reason FROM outbox_requeue_audit WHERE id=1`).Scan(&operator, &reason))
		require.Equal(t, []string{"alice", "mysql is back"}, []string{operator, reason})
	})
	t.Run("ByTargetJSON", func(t *testing.T) {
		r := b.run(t, "-json", "outbox", "requeue", "--target", "msg", "--operator", "alice", "--reason", "broker fixed")
		require.Equal(t, 0, r.code, r.stderr)
		v := decodeJSON(t, r.stdout)
		require.Equal(t, float64(1), v["requeued"])
		require.Equal(t, []any{float64(3)}, v["requeued_ids"])
		require.Equal(t, float64(2), v["audit_id"])
		st, _ := state(3)
		require.Equal(t, "PENDING", st)
	})
	t.Run("NothingToRequeue", func(t *testing.T) {
		r := b.run(t, "outbox", "requeue", "--target", "schd", "--operator", "alice", "--reason", "check")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "requeued 0 outbox row(s) (audit 3)\n", r.stdout)
	})
	t.Run("UsageErrors", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
			want string
		}{
			{"NoOperator", []string{"--id", "2", "--reason", "x"}, "msgxctl outbox requeue: --operator is required"},
			{"NoReason", []string{"--id", "2", "--operator", "alice"}, "--reason is required"},
			{"NoSelection", []string{"--operator", "alice", "--reason", "x"}, "give --id N (repeatable) or --target T"},
			{"BothSelections", []string{"--id", "2", "--target", "msg", "--operator", "alice", "--reason", "x"}, "not both"},
			{"BadID", []string{"--id", "two", "--operator", "alice", "--reason", "x"}, `want a positive outbox ID, got "two"`},
			{"BadState", []string{"--id", "2", "--state", "sent", "--operator", "alice", "--reason", "x"}, `--state "sent": want dead or abandoned`},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := b.run(t, append([]string{"outbox", "requeue"}, tc.args...)...)
				require.Equal(t, 2, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
				require.Contains(t, r.stderr, tc.want)
			})
		}
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_requeue_audit`).Scan(&n))
		require.Equal(t, 3, n, "refused command lines never reach the server")
	})
	t.Run("Help", func(t *testing.T) {
		r := b.run(t, "outbox", "help")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "outbox requeue (--id N ... | --target T) [--state S] --operator NAME --reason TEXT")
	})
}

// TestMsgxctl_R_F2_BackfillAbandoned: "backfill abandoned" lists the
// abandoned backfills as a table or JSON, paged (R-F2, R-D4).
func TestMsgxctl_R_F2_BackfillAbandoned(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("Empty", func(t *testing.T) {
		r := b.run(t, "backfill", "abandoned")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "no abandoned backfills\n", r.stdout)
	})

	created, abandoned := testNow.Add(-time.Hour), testNow.Add(-30*time.Minute)
	_, err := b.pool.Exec(context.Background(), `INSERT INTO outbox (id, target, pkey, msg_id, state, attempts, next_attempt_at, last_error, outcome, created_at, sent_at) VALUES
	  (10, 'mailbox', '50', 50, 'ABANDONED', 1, $1, NULL,             'row-missing', $1, $2),
	  (11, 'mailbox', '51', 51, 'ABANDONED', 2, $1, 'mysql: timeout', 'row-missing', $1, $2)`, created, abandoned)
	require.NoError(t, err)

	t.Run("Table", func(t *testing.T) {
		r := b.run(t, "backfill", "abandoned")
		require.Equal(t, 0, r.code, r.stderr)
		c, a := local(created), local(abandoned)
		w := len(c)
		want := fmt.Sprintf(`ID  MSG_ID  %-[3]*[4]s  %-[3]*[5]s  ATTEMPTS  OUTCOME      LAST_ERROR
10  50      %[1]s  %[2]s  1         row-missing  -
11  51      %[1]s  %[2]s  2         row-missing  mysql: timeout
`, c, a, w, "CREATED_AT", "ABANDONED_AT")
		require.Equal(t, want, r.stdout)
	})
	t.Run("PagingAndJSON", func(t *testing.T) {
		r := b.run(t, "backfill", "abandoned", "--limit", "1")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "\nmore rows: repeat with --after 10\n")
		r = b.run(t, "-json", "backfill", "abandoned", "--after", "10")
		require.Equal(t, 0, r.code, r.stderr)
		v := decodeJSON(t, r.stdout)
		entries := v["entries"].([]any)
		require.Len(t, entries, 1)
		e := entries[0].(map[string]any)
		require.Equal(t, float64(11), e["id"])
		require.Equal(t, float64(51), e["msg_id"])
		require.Equal(t, "row-missing", e["outcome"])
		require.Equal(t, "2026-03-01T11:30:00Z", e["abandoned_at"])
	})
	t.Run("BadLimit", func(t *testing.T) {
		r := b.run(t, "backfill", "abandoned", "--limit", "0")
		require.Equal(t, 2, r.code)
		require.Contains(t, r.stderr, "--limit 0: must be positive")
	})
}
