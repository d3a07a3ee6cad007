package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMsgxctl_R_F2_R_D4_OutboxDiscardAndBackfillAcknowledge: "outbox
// discard" ends DEAD rows by ID or target and "backfill acknowledge" closes
// abandoned backfills, both with operator and reason, reporting skipped
// IDs; an incomplete command line is refused before calling (R-F2, R-D2,
// R-D4).
func TestMsgxctl_R_F2_R_D4_OutboxDiscardAndBackfillAcknowledge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pool.Exec(context.Background(), `INSERT INTO outbox (id, target, pkey, msg_id, state, attempts, outcome) VALUES
	  (900, 'coutmsgs', 'RQFD', NULL, 'DEAD',      10, NULL),
	  (901, 'coutmsgs', 'RQRD', NULL, 'DEAD',      10, NULL),
	  (910, 'mailbox',  '91',   91,   'ABANDONED', 1,  'row-missing')`)
	require.NoError(t, err)
	state := func(id int64) string {
		var st string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state FROM outbox WHERE id=$1`, id).Scan(&st))
		return st
	}
	audits := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_discard_audit`).Scan(&n))
		return n
	}

	t.Run("UsageErrors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"outbox", "discard", "--id", "900", "--reason", "x"}, "msgxctl outbox discard: --operator is required"},
			{[]string{"outbox", "discard", "--id", "900", "--operator", "alice"}, "--reason is required"},
			{[]string{"outbox", "discard", "--operator", "alice", "--reason", "x"}, "give --id N (repeatable) or --target T"},
			{[]string{"outbox", "discard", "--id", "900", "--target", "coutmsgs", "--operator", "alice", "--reason", "x"}, "not both"},
			{[]string{"backfill", "acknowledge", "--operator", "alice", "--reason", "x"}, "at least one abandoned backfill"},
			{[]string{"backfill", "acknowledge", "x1", "--operator", "alice", "--reason", "x"}, `outbox ID "x1": want a positive integer`},
			{[]string{"backfill", "acknowledge", "910", "--reason", "x"}, "msgxctl backfill acknowledge: --operator is required"},
		} {
			r := b.run(t, tc.args...)
			require.Equal(t, 2, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		}
		require.Zero(t, audits(), "refused command lines never reach the server")
	})
	t.Run("DiscardByID", func(t *testing.T) {
		r := b.run(t, "outbox", "discard", "--id", "900", "--id", "910", "--operator", "alice", "--reason", "answer no longer needed")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "discarded 1 outbox row(s) (audit 1)\ndiscarded: 900\nskipped (missing, or not DEAD): 910\n", r.stdout)
		require.Equal(t, "DISCARDED", state(900))
		require.Equal(t, "ABANDONED", state(910))
	})
	t.Run("DiscardByTargetJSON", func(t *testing.T) {
		r := b.run(t, "-json", "outbox", "discard", "--target", "coutmsgs", "--operator", "alice", "--reason", "requests withdrawn")
		require.Equal(t, 0, r.code, r.stderr)
		v := decodeJSON(t, r.stdout)
		require.Equal(t, []any{float64(901)}, v["discarded_ids"])
		require.Equal(t, "DISCARDED", state(901))
	})
	t.Run("Acknowledge", func(t *testing.T) {
		r := b.run(t, "backfill", "acknowledge", "910", "900", "--operator", "alice", "--reason", "row purged upstream")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "acknowledged 1 abandoned backfill(s) (audit 3)\nacknowledged: 910\nskipped (missing, or not an abandoned backfill): 900\n", r.stdout)
		require.Equal(t, "DISCARDED", state(910))
		r = b.run(t, "backfill", "abandoned")
		require.Equal(t, 0, r.code, r.stderr)
		require.NotContains(t, r.stdout, "910")
	})
	t.Run("Help", func(t *testing.T) {
		r := b.run(t, "help")
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "outbox discard (--id N ... | --target T) --operator NAME --reason TEXT")
		require.Contains(t, r.stdout, "backfill acknowledge ID... --operator NAME --reason TEXT")
	})
}
