package relay

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestFloors_R_J5_LateCommitIsNeverPassed: a row whose transaction commits
// after a drain passed its ID is announced with a lower bound of its ID;
// the next drain starts below it, even when the announcement arrived while
// the drain that passed it was still running.
func TestFloors_R_J5_LateCommitIsNeverPassed(t *testing.T) {
	var f floors
	at, tok := f.start(TargetMsg)
	require.Zero(t, at, "no listener: from the start")
	f.advance(TargetMsg, tok, 100)
	at, _ = f.start(TargetMsg)
	require.Zero(t, at, "without a listener the floor never moves")

	f.listening(true)
	at, tok = f.start(TargetMsg)
	require.Zero(t, at)
	f.advance(TargetMsg, tok, 100)
	at, tok = f.start(TargetMsg)
	require.EqualValues(t, 100, at, "rows up to 100 delivered")

	f.lower(40) // a transaction that used IDs above 40 committed during this drain
	f.advance(TargetMsg, tok, 200)
	at, tok = f.start(TargetMsg)
	require.EqualValues(t, 40, at, "the late rows are scanned")
	f.advance(TargetMsg, tok, 200)
	require.EqualValues(t, 200, f.peek(TargetMsg))

	f.listening(false)
	require.Zero(t, f.peek(TargetMsg), "nothing is announced while the listener is away")
	f.listening(true)
	at, _ = f.start(TargetMsg)
	require.Zero(t, at, "a reconnected listener scans from the start once")

	f.lowerTarget(TargetMailbox, 0)
	at, _ = f.start(TargetMailbox)
	require.Zero(t, at)
}

// TestNotify_R_J5_OnlyStatementsThatInsertAnnounce: the outbox notification
// announces each statement that inserted rows, with a lower bound of its
// IDs, and no statement that inserted none. Statements inserting nothing
// are common (the mailbox intents of a registration or ack batch that
// finished no message); each used to wake every loop for an empty read.
func TestNotify_R_J5_OnlyStatementsThatInsertAnnounce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listen, err := pgx.Connect(ctx, b.pgURL)
	require.NoError(t, err)
	defer listen.Close(context.Background())
	_, err = listen.Exec(ctx, "LISTEN msgx_outbox")
	require.NoError(t, err)

	const none = `INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		SELECT 'mailbox', '1', NULL, now(), now() WHERE false`
	_, err = b.pool.Exec(ctx, none)
	require.NoError(t, err)
	// One transaction: nothing, then one statement inserting through two
	// common table expressions, then nothing.
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, none)
	require.NoError(t, err)
	var first, second int64
	require.NoError(t, tx.QueryRow(ctx, `
		WITH a AS (INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		           VALUES ('mailbox', '2', NULL, now(), now()) RETURNING id),
		     c AS (INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		           VALUES ('mailbox', '3', NULL, now(), now()) RETURNING id)
		SELECT (SELECT id FROM a), (SELECT id FROM c)`).Scan(&first, &second))
	_, err = tx.Exec(ctx, none)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	last := b.addRow(t, TargetMailbox, "4", nil, "")

	var got []string
	for len(got) == 0 || got[len(got)-1] != strconv.FormatInt(last-1, 10) {
		n, err := listen.WaitForNotification(ctx)
		require.NoError(t, err, "notifications so far: %v", got)
		got = append(got, n.Payload)
	}
	require.Equal(t, []string{strconv.FormatInt(min(first, second)-1, 10), strconv.FormatInt(last-1, 10)}, got,
		"one notification per transaction that inserted, below its IDs; none for a statement that inserted nothing")
}
