package main

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMsgxctl_R_F2_R_F1_Replay runs the replay commands against a real
// control plane: preview by IDs and by class and range, execute with the
// required operator and reason, and status of the recorded request, as
// tables and -json (US-10).
func TestMsgxctl_R_F2_R_F1_Replay(t *testing.T) {
	t.Parallel()
	b := setup(t) // 42 DEAD(CODEC_ERROR) finished 10 min before testNow, 43 PENDING, 44 FAILED

	t.Run("PreviewByIDs", func(t *testing.T) {
		r := b.run(t, "replay", "preview", "42", "43", "77")
		require.Equal(t, 0, r.code, r.stderr)
		requireLine(t, r.stdout, "MSG_ID", "STATE", "CLASS", "TYPE", "STYP", "ATTEMPTS", "FINISHED_AT", "REPLAYABLE", "REFUSAL", "REASON")
		requireLine(t, r.stdout, "42", "DEAD", "CODEC_ERROR", "FLOP", "UPDT", "3", local(testNow.Add(-10*time.Minute)), "yes", "-", "decoding", "FLOP:", "bad", "STOT")
		require.Regexp(t, `(?m)^43\s+PENDING\s+-\s+-\s+-\s+0\s+-\s+no\s+state PENDING is not replayable`, r.stdout)
		require.Contains(t, r.stdout, "2 matched, 1 replayable\n")
		require.Contains(t, r.stdout, "not found (never registered or cleaned up): 77\n")
	})
	t.Run("PreviewByClassAndRange", func(t *testing.T) {
		r := b.run(t, "-json", "replay", "preview", "--class", "codec_error,infra",
			"--from", testNow.Add(-time.Hour).Format(time.RFC3339), "--to", testNow.Format(time.RFC3339))
		require.Equal(t, 0, r.code, r.stderr)
		v := decodeJSON(t, r.stdout)
		require.Equal(t, float64(1), v["count"])
		msgs := v["messages"].([]any)
		require.Equal(t, float64(42), msgs[0].(map[string]any)["msg_id"])
	})
	t.Run("UsageErrors", func(t *testing.T) {
		for _, args := range [][]string{
			{"replay", "preview"},
			{"replay", "preview", "42", "--class", "infra"},
			{"replay", "preview", "--class", "infra"},
			{"replay", "preview", "--class", "bogus", "--from", "2026-03-01T00:00:00Z", "--to", "2026-03-02T00:00:00Z"},
			{"replay", "preview", "--class", "infra", "--from", "yesterday", "--to", "2026-03-02T00:00:00Z"},
			{"replay", "execute", "42"},
			{"replay", "execute", "42", "--operator", "alice"},
			{"replay", "status", "0"},
		} {
			r := b.run(t, args...)
			require.Equal(t, 2, r.code, "%v: %s", args, r.stdout)
		}
	})
	t.Run("ExecuteThenStatus", func(t *testing.T) {
		r := b.run(t, "replay", "execute", "42", "43", "--operator", "alice", "--reason", "codec fixed in 2.4")
		require.Equal(t, 0, r.code, r.stderr)
		m := regexpFind(t, `replay request (\d+) recorded \(PENDING\): 1 message\(s\): 42\n`, r.stdout)
		require.Contains(t, r.stdout, "left out (not replayable):")
		require.Regexp(t, `(?m)^43\s+PENDING`, r.stdout)
		require.Contains(t, r.stdout, "msgxctl replay status "+m)

		s := b.run(t, "replay", "status", m)
		require.Equal(t, 0, s.code, s.stderr)
		requireLine(t, s.stdout, "id", m)
		requireLine(t, s.stdout, "state", "PENDING")
		requireLine(t, s.stdout, "operator", "alice")
		requireLine(t, s.stdout, "reason", "codec", "fixed", "in", "2.4")
		requireLine(t, s.stdout, "msg_ids", "42")
		requireLine(t, s.stdout, "applied_at", "-")

		j := b.run(t, "-json", "replay", "status", m)
		require.Equal(t, 0, j.code, j.stderr)
		req := decodeJSON(t, j.stdout)["request"].(map[string]any)
		require.Equal(t, "REPLAY_REQUEST_STATE_PENDING", req["state"])
		require.Equal(t, []any{float64(42)}, req["msg_ids"])

		again := b.run(t, "replay", "execute", "42", "--operator", "bob", "--reason", "twice")
		require.Equal(t, 1, again.code)
		require.Contains(t, again.stderr, "none of the selected messages is replayable")

		missing := b.run(t, "replay", "status", strconv.Itoa(1000))
		require.Equal(t, 1, missing.code)
		require.Contains(t, missing.stderr, "not found: replay request 1000 not found")
	})
}

// regexpFind returns the first group of pattern in s.
func regexpFind(t *testing.T, pattern, s string) string {
	t.Helper()
	require.Regexp(t, pattern, s)
	return regexp.MustCompile(pattern).FindStringSubmatch(s)[1]
}
