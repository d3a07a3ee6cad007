package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// answerCensus records figures on the next PENDING census as a dispatcher
// does once it counted the mailbox, as soon as the census is requested.
func (b *testBundle) answerCensus(t *testing.T, set string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			tag, err := b.pool.Exec(ctx, `UPDATE mailbox_census SET started_at = $1, finished_at = $1, `+set+` WHERE state = 'PENDING'`,
				append([]any{testNow}, args...)...)
			if err != nil || tag.RowsAffected() > 0 {
				done <- err
				return
			}
			timer := time.NewTimer(20 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		done <- ctx.Err()
	}()
	t.Cleanup(func() {
		require.NoError(t, <-done)
		cancel()
	})
}

// TestMsgxctl_R_L6_R_N9_MailboxCensus: "mailbox census" asks the control
// plane for the cutover's mailbox figures, waits until a dispatcher
// counted them and prints each labelled with the runbook step that asks
// for it (or as JSON); a census nobody counts within --timeout, one that
// failed, a missing operator and a negative start are errors.
func TestMsgxctl_R_L6_R_N9_MailboxCensus(t *testing.T) {
	t.Parallel()
	b := setup(t)

	b.answerCensus(t, `state = 'DONE', next_id = 200, rows_from_start = 80, after_last_marked = 150,
		unmarked_from_start = 50, unmarked_below_start = 0`)
	r := b.run(t, "mailbox", "census", "--start", "120", "--operator", "alice")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "state", "DONE", "-")
	requireLine(t, r.stdout, "start", "120")
	requireLine(t, r.stdout, "next_id", "200", "step", "1:", "S,", "the", "largest", "mailbox", "ID", "+", "1")
	requireLine(t, r.stdout, "rows_from_start", "80", "step", "2:", "rows", "with", "ID", ">=", "start,", "marked", "or", "not")
	requireLine(t, r.stdout, "after_last_marked", "150", "step", "3:", "START,", "the", "largest", "marked", "ID", "+", "1")
	requireLine(t, r.stdout, "unmarked_from_start", "50", "step", "4:", "unmarked", "rows", "with", "ID", ">=", "start")
	requireLine(t, r.stdout, "unmarked_below_start", "0", "step", "5:", "unmarked", "rows", "with", "ID", "<", "start")
	var principal string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT operator FROM mailbox_census WHERE start_id = 120`).Scan(&principal))
	require.Equal(t, "alice", principal)

	b.answerCensus(t, `state = 'DONE', next_id = 200, after_last_marked = 150`)
	r = b.run(t, "mailbox", "census", "--operator", "alice", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	v := decodeJSON(t, r.stdout)
	require.Equal(t, "MAILBOX_CENSUS_STATE_DONE", v["state"])
	require.InDelta(t, 200, v["next_id"], 0)
	require.InDelta(t, 150, v["after_last_marked"], 0)
	require.InDelta(t, 0, v["start_id"], 0, "no start")

	b.answerCensus(t, `state = 'FAILED', error = 'counting the next ID in the mailbox: i/o timeout'`)
	r = b.run(t, "mailbox", "census", "--start", "5", "--operator", "alice")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "failed: counting the next ID in the mailbox: i/o timeout")

	// Long enough that the control plane answers the request itself on a
	// loaded machine (300 ms once ran out before it did, in the
	// race-detecting CI run); nothing counts the census meanwhile.
	r = b.run(t, "--timeout", "3s", "mailbox", "census", "--start", "5", "--operator", "alice")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not counted within --timeout 3s (is a dispatcher running and reaching the mailbox?)")

	r = b.run(t, "mailbox", "census", "--start", "5")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--operator is required")
	r = b.run(t, "mailbox", "census", "--start", "-5", "--operator", "alice")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--start -5: must not be negative")
}
