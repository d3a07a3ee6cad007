package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMsgxctl_R_H3_MessageList: "message list" lists messages by state,
// error class and receive time as a table or JSON, paged by ID, and
// refuses bad filters before calling (R-H3).
func TestMsgxctl_R_H3_MessageList(t *testing.T) {
	t.Parallel()
	b := setup(t) // 42 DEAD(CODEC_ERROR) received -90 min, 43 PENDING received -30 min, 44 FAILED received -45 min

	t.Run("StateTable", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "message", "list", "--state", "pending,failed")
		require.Equal(t, 0, r.code, r.stderr)
		requireLine(t, r.stdout, "MSG_ID", "STATE", "CLASS", "TYPE", "STYP", "ATTEMPTS", "RECEIVED_AT", "UPDATED_AT", "REASON")
		require.Regexp(t, `(?m)^43\s+PENDING\s+-\s+-\s+-\s+0\s+`+local(testNow.Add(-30*time.Minute))+`\s`, r.stdout)
		require.Regexp(t, `(?m)^44\s+FAILED\s+-\s+-\s+-\s+0\s+`+local(testNow.Add(-45*time.Minute))+`\s`, r.stdout)
		require.NotRegexp(t, `(?m)^42\s`, r.stdout, "message 42 is DEAD") // a time of day may contain 42
		require.NotContains(t, r.stdout, "more messages")
	})
	t.Run("ClassAndRange", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "message", "list", "--class", "codec_error",
			"--from", testNow.Add(-2*time.Hour).Format(time.RFC3339), "--to", testNow.Format(time.RFC3339))
		require.Equal(t, 0, r.code, r.stderr)
		requireLine(t, r.stdout, "42", "DEAD", "CODEC_ERROR", "FLOP", "UPDT", "3", local(testNow.Add(-90*time.Minute)),
			local(testNow.Add(-10*time.Minute)), "decoding", "FLOP:", "bad", "STOT")
	})
	t.Run("NoClassAndRangeExcludesOlder", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "message", "list", "--class", "none", "--from", testNow.Add(-40*time.Minute).Format(time.RFC3339))
		require.Equal(t, 0, r.code, r.stderr)
		require.Regexp(t, `(?m)^43\s+PENDING`, r.stdout)
		require.NotRegexp(t, `(?m)^4[24]\s`, r.stdout)
	})
	t.Run("NothingMatches", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "message", "list", "--state", "applied")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "no messages match\n", r.stdout)
	})
	t.Run("PagesJSON", func(t *testing.T) {
		t.Parallel()
		r := b.run(t, "message", "list", "--limit", "2")
		require.Equal(t, 0, r.code, r.stderr)
		require.Regexp(t, `(?m)^42\s`, r.stdout)
		require.Regexp(t, `(?m)^43\s`, r.stdout)
		require.Contains(t, r.stdout, "\nmore messages: repeat with --after 43\n")

		j := b.run(t, "-json", "message", "list", "--limit", "2", "--after", "43")
		require.Equal(t, 0, j.code, j.stderr)
		v := decodeJSON(t, j.stdout)
		msgs := v["messages"].([]any)
		require.Len(t, msgs, 1)
		m := msgs[0].(map[string]any)
		require.Equal(t, float64(44), m["msg_id"])
		require.Equal(t, "MESSAGE_STATE_FAILED", m["state"])
		require.Equal(t, "", m["raw"], "never the raw XML")
		require.Equal(t, float64(0), v["next_after_msg_id"])
	})
	t.Run("UsageErrors", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--state", "lost"}, `msgxctl message list: --state "lost": want pending, failed, applied, succeeded, skipped or dead`},
			{[]string{"--class", "bogus"}, `--class "bogus": want malformed, codec_error, unsupported, infra, protocol, exhausted, operator or none`},
			{[]string{"--from", "yesterday"}, `--from "yesterday": want RFC 3339`},
			{[]string{"--limit", "0"}, "--limit 0: must be positive"},
			{[]string{"43"}, `takes no arguments, got "43"`},
		} {
			r := b.run(t, append([]string{"message", "list"}, tc.args...)...)
			require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stdout)
			require.Contains(t, r.stderr, tc.want)
		}
	})
	t.Run("ServerRefusesAnEmptyRange", func(t *testing.T) {
		t.Parallel()
		ts := testNow.Format(time.RFC3339)
		r := b.run(t, "message", "list", "--from", ts, "--to", ts)
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "msgxctl: invalid request: from 2026-03-01T12:00:00Z must be before to 2026-03-01T12:00:00Z")
	})
}

// TestMsgxctl_R_H3_MessageDead: "message dead" ends a stuck head as
// DEAD(OPERATOR) with the operator and reason, prints what it was and the
// backfill intent, refuses a terminal message with the hint to replay, and
// refuses an incomplete command line before calling (R-H3).
func TestMsgxctl_R_H3_MessageDead(t *testing.T) {
	t.Parallel()
	b := setup(t) // 42 DEAD(CODEC_ERROR), 43 PENDING, 44 FAILED
	// The fixture's outbox rows have explicit IDs; new rows come after them.
	_, err := b.pool.Exec(context.Background(), `SELECT setval('outbox_id_seq', (SELECT max(id) FROM outbox))`)
	require.NoError(t, err)
	audits := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM message_end_audit`).Scan(&n))
		return n
	}

	t.Run("UsageErrors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"43", "--reason", "x"}, "msgxctl message dead: --operator is required (ending a message is audited)"},
			{[]string{"43", "--operator", "alice"}, "--reason is required"},
			{[]string{"--operator", "alice", "--reason", "x"}, "want argument(s) ID, got 0"},
			{[]string{"x43", "--operator", "alice", "--reason", "x"}, `mailbox ID "x43": want a positive integer`},
		} {
			r := b.run(t, append([]string{"message", "dead"}, tc.args...)...)
			require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stdout)
			require.Contains(t, r.stderr, tc.want)
		}
		require.Zero(t, audits(), "refused command lines never reach the server")
	})
	t.Run("EndsThePendingHead", func(t *testing.T) {
		r := b.run(t, "message", "dead", "43", "--operator", "alice", "--reason", "blocks the FIFO since 03:00")
		require.Equal(t, 0, r.code, r.stderr)
		requireLine(t, r.stdout, "msg_id", "43")
		requireLine(t, r.stdout, "state", "DEAD")
		requireLine(t, r.stdout, "error_class", "OPERATOR")
		requireLine(t, r.stdout, "reason", "ended", "by", "operator", "alice", "(was", "PENDING):", "blocks", "the", "FIFO", "since", "03:00")
		requireLine(t, r.stdout, "was", "PENDING")
		requireLine(t, r.stdout, "finished_at", local(testNow))
		requireLine(t, r.stdout, "audit_id", "1")
		var outboxID string
		require.NoError(t, b.pool.QueryRow(context.Background(),
			`SELECT id::text FROM outbox WHERE target = 'mailbox' AND msg_id = 43 AND state = 'PENDING'`).Scan(&outboxID))
		requireLine(t, r.stdout, "backfill_outbox_id", outboxID)
		require.Contains(t, r.stdout, "msgxctl message get 43")

		g := b.run(t, "message", "get", "43")
		require.Equal(t, 0, g.code, g.stderr)
		requireLine(t, g.stdout, "state", "DEAD")
		requireLine(t, g.stdout, "error_class", "OPERATOR")
	})
	t.Run("EndsTheFailedOneJSON", func(t *testing.T) {
		r := b.run(t, "-json", "message", "dead", "44", "--operator", "bob", "--reason", "resent")
		require.Equal(t, 0, r.code, r.stderr)
		v := decodeJSON(t, r.stdout)
		require.Equal(t, "ERROR_CLASS_OPERATOR", v["message"].(map[string]any)["error_class"])
		au := v["audit"].(map[string]any)
		require.Equal(t, "MESSAGE_STATE_FAILED", au["previous_state"])
		require.Equal(t, "bob", au["operator"])
		require.Equal(t, "resent", au["reason"])
	})
	t.Run("TerminalIsRefused", func(t *testing.T) {
		r := b.run(t, "message", "dead", "42", "--operator", "alice", "--reason", "again")
		require.Equal(t, 1, r.code)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "msgxctl: refused: message 42 is already DEAD CODEC_ERROR since")
		require.Contains(t, r.stderr, "use replay (msgxctl replay preview 42")
	})
	t.Run("MissingIsNotFound", func(t *testing.T) {
		r := b.run(t, "message", "dead", "99", "--operator", "alice", "--reason", "x")
		require.Equal(t, 1, r.code)
		require.Equal(t, "msgxctl: not found: message 99 not found: never registered by the processor, or already cleaned up\n", r.stderr)
	})
	require.Equal(t, 2, audits())
}
