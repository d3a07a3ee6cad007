package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMsgxctl_R_F2_R_E4_ProjectionRebuild: "projection rebuild" enqueues a
// rebuild of the Redis projection with operator and reason, "projection
// status" follows it, and an incomplete command line is refused before
// calling (R-F2, R-E4).
func TestMsgxctl_R_F2_R_E4_ProjectionRebuild(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The fixture's outbox rows have explicit IDs; move the sequence past them.
	_, err := b.pool.Exec(context.Background(), `SELECT setval(pg_get_serial_sequence('outbox', 'id'), 100)`)
	require.NoError(t, err)

	t.Run("RebuildTable", func(t *testing.T) {
		r := b.run(t, "projection", "rebuild", "--operator", "alice", "--reason", "redis was flushed")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "projection rebuild 1 enqueued: 1 flight(s) (1 active, 0 deleted), max msg_id 42\n"+
			"the projector completes it: look for generation=1 in its log or at msgx_projector_rebuilds_total; "+
			"'msgxctl projection status 1' shows the delivery\n", r.stdout)
		var operator, reason string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT operator, reason FROM projection_rebuild WHERE id=1`).Scan(&operator, &reason))
		require.Equal(t, []string{"alice", "redis was flushed"}, []string{operator, reason})
	})
	t.Run("RebuildJSON", func(t *testing.T) {
		r := b.run(t, "-json", "projection", "rebuild", "--operator", "bob", "--reason", "again")
		require.Equal(t, 0, r.code, r.stderr)
		v := decodeJSON(t, r.stdout)["rebuild"].(map[string]any)
		require.Equal(t, float64(2), v["generation"])
		require.Equal(t, float64(1), v["active"])
		require.Equal(t, "bob", v["operator"])
	})
	t.Run("StatusTable", func(t *testing.T) {
		_, err := b.pool.Exec(context.Background(), `UPDATE outbox SET state='SENT' WHERE target='projection-control' AND pkey='1'`)
		require.NoError(t, err)
		r := b.run(t, "projection", "status", "1")
		require.Equal(t, 0, r.code, r.stderr)
		requireLine(t, r.stdout, "generation", "1")
		requireLine(t, r.stdout, "operator", "alice")
		requireLine(t, r.stdout, "reason", "redis", "was", "flushed")
		requireLine(t, r.stdout, "flights", "1", "(1", "active,", "0", "deleted)")
		requireLine(t, r.stdout, "max_msg_id", "42")
		requireLine(t, r.stdout, "records", "1", "pending,", "0", "sent,", "0", "dead,", "0", "cleaned", "up")
		require.Regexp(t, `(?m)^manifest\s+outbox \d+, SENT$`, r.stdout)
	})
	t.Run("StatusJSON", func(t *testing.T) {
		r := b.run(t, "-json", "projection", "status", "2")
		require.Equal(t, 0, r.code, r.stderr)
		d := decodeJSON(t, r.stdout)["rebuild"].(map[string]any)["delivery"].(map[string]any)
		require.Equal(t, float64(1), d["pending"])
		require.Equal(t, "OUTBOX_STATE_PENDING", d["manifest_state"])
	})
	t.Run("StatusNotFound", func(t *testing.T) {
		r := b.run(t, "projection", "status", "99")
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "projection rebuild 99 not found")
	})
	t.Run("UsageErrors", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
			want string
		}{
			{"NoOperator", []string{"rebuild", "--reason", "x"}, "msgxctl projection rebuild: --operator and --reason are required"},
			{"NoReason", []string{"rebuild", "--operator", "alice"}, "--operator and --reason are required"},
			{"ExtraArgument", []string{"rebuild", "now", "--operator", "alice", "--reason", "x"}, "takes no arguments"},
			{"StatusWithoutGeneration", []string{"status"}, "want argument(s) GENERATION"},
			{"StatusBadGeneration", []string{"status", "first"}, `rebuild generation "first": want a positive integer`},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := b.run(t, append([]string{"projection"}, tc.args...)...)
				require.Equal(t, 2, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
				require.Contains(t, r.stderr, tc.want)
			})
		}
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM projection_rebuild`).Scan(&n))
		require.Equal(t, 2, n, "refused command lines never reach the server")
	})
	t.Run("Help", func(t *testing.T) {
		r := b.run(t, "projection", "help")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "projection rebuild --operator NAME --reason TEXT")
		require.Contains(t, r.stdout, "projection status GENERATION")
	})
}
