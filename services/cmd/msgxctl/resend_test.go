package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMsgxctl_R_M1_OutboxResendSendsTheWholeWindow: "outbox resend" sends
// again what a Kafka target delivered in a window, after the broker lost
// records it had acknowledged. A window holding more rows than one call
// moves is sent by repeated calls over the same window, each audited, so
// every row goes back to PENDING once; --dry-run counts the window first;
// an incomplete command line is refused before calling.
func TestMsgxctl_R_M1_OutboxResendSendsTheWholeWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const rows = 10000 + 1 // one more than a call moves (MaxResendRows in the control plane's admin package)
	_, err := b.pool.Exec(ctx, `INSERT INTO outbox (id, target, pkey, payload, state, attempts, next_attempt_at, created_at, sent_at)
		SELECT 1000 + i, 'flight-state', (i % 500)::text, 'p', 'SENT', 1, $1::timestamptz, $1::timestamptz, $1::timestamptz + i * interval '1 ms'
		FROM generate_series(1, $2::int) AS i`, testNow.Add(-10*time.Minute), rows)
	require.NoError(t, err)
	count := func(q string) int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, q).Scan(&n))
		return n
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"outbox", "resend", "--since", "2026-03-01T11:00:00Z", "--operator", "alice", "--reason", "x"}, "--target is required"},
		{[]string{"outbox", "resend", "--target", "msg", "--operator", "alice", "--reason", "x"}, "--since is required"},
		{[]string{"outbox", "resend", "--target", "msg", "--since", "11:00", "--operator", "alice", "--reason", "x"}, `--since "11:00": want RFC 3339`},
		{[]string{"outbox", "resend", "--target", "msg", "--since", "2026-03-01T11:00:00Z", "--reason", "x"}, "--operator is required"},
		{[]string{"outbox", "resend", "--target", "msg", "--since", "2026-03-01T11:00:00Z", "--operator", "alice"}, "--reason is required"},
	} {
		r := b.run(t, tc.args...)
		require.Equal(t, 2, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
		require.Contains(t, r.stderr, tc.want)
	}
	r := b.run(t, "outbox", "resend", "--target", "mailbox", "--since", "2026-03-01T11:00:00Z", "--operator", "alice", "--reason", "x")
	require.NotZero(t, r.code)
	require.Contains(t, r.stderr, "only the Kafka targets can be re-sent")
	require.Zero(t, count(`SELECT count(*) FROM outbox_requeue_audit`), "refused command lines move and record nothing")

	r = b.run(t, "outbox", "resend", "--target", "flight-state", "--since", local(testNow.Add(-time.Hour)),
		"--operator", "alice", "--reason", "how much", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("would re-send %d flight-state row(s) sent from %s until %s\n", rows, local(testNow.Add(-time.Hour)), local(testNow)), r.stdout)
	require.Zero(t, count(`SELECT count(*) FROM outbox WHERE state = 'PENDING'`), "a dry run moves nothing")

	r = b.run(t, "outbox", "resend", "--target", "flight-state", "--since", local(testNow.Add(-time.Hour)),
		"--operator", "alice", "--reason", "unclean leader election")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf("re-sending %d flight-state row(s) sent from %s until %s (audit 1, 2)\n", rows, local(testNow.Add(-time.Hour)), local(testNow)), r.stdout)
	require.Equal(t, rows, count(`SELECT count(*) FROM outbox WHERE target = 'flight-state' AND state = 'PENDING' AND retry AND sent_at IS NULL`))
	require.Equal(t, rows, count(`SELECT sum(cardinality(outbox_ids)) FROM outbox_requeue_audit WHERE action = 'resend'`),
		"each row moved once, over two audited calls")
	require.Equal(t, 1, count(`SELECT count(*) FROM outbox WHERE target = 'msg' AND state = 'SENT'`), "another target's rows stay")
}
