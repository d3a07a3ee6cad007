package relay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// seedRelayWork inserts n msg rows and n marker intents of existing,
// unmarked mailbox rows, all due now.
func seedRelayWork(t *testing.T, b *testBundle, n int) {
	t.Helper()
	now := b.clock.Now()
	b.exec(t, `INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at)
		SELECT 'msg', (g % 1000)::text, convert_to(repeat('x', 400), 'UTF8'), '{"msgx-event-id":"e"}'::jsonb, g, $2, $2
		FROM generate_series(1, $1) g`, n, now)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var first int64
	require.NoError(t, b.mailbox.QueryRowContext(ctx, `SELECT COALESCE(MAX(CMINMSGS_ID), 0) FROM CMINMSGS`).Scan(&first))
	tx, err := b.mailbox.BeginTx(ctx, nil)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		_, err := tx.ExecContext(ctx, `INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_STATUS) VALUES ('<x/>', 'VALID')`)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, finished_at)
		SELECT g, 'SUCCEEDED', '', 0, $3 FROM generate_series($1::bigint, $2::bigint) g ON CONFLICT DO NOTHING`, first+1, first+int64(n), now)
	b.exec(t, `INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		SELECT 'mailbox', g::text, g, $3, $3 FROM generate_series($1::bigint, $2::bigint) g`, first+1, first+int64(n), now)
}

// TestRelayRate_R_J2_MsgRowsAndMarkersPerSecond measures the relay's own
// rates with its drains back to back at the default batch (500): msg rows
// produced and recorded per second, markers written and recorded per
// second. It fails only far below R-J2's 2,000 msg/s end to end, on a
// gross regression (the figures are in docs/performance.md).
func TestRelayRate_R_J2_MsgRowsAndMarkersPerSecond(t *testing.T) {
	t.Parallel()
	const n = 20_000
	b := setup(t)
	b.r.floors.listening(true)
	seedRelayWork(t, b, n)
	cl := b.producer(t, b.kcfg.Topics.Msg)
	start := time.Now()
	for {
		more, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg)
		require.NoError(t, err)
		if !more {
			break
		}
	}
	msgRate := float64(n) / time.Since(start).Seconds()
	start = time.Now()
	for {
		more, err := b.r.DrainMailbox(flushCtx(t))
		require.NoError(t, err)
		if !more {
			break
		}
	}
	markerRate := float64(n) / time.Since(start).Seconds()
	var left int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE state <> 'SENT'`).Scan(&left))
	require.Zero(t, left)
	t.Logf("msg target: %.0f rows/s; mailbox: %.0f markers/s (%d each, batch %d)", msgRate, markerRate, n, b.r.opt.Batch)
	require.Greater(t, msgRate, 400.0, "msg rows/s, 20%% of R-J2")
	require.Greater(t, markerRate, 400.0, "markers/s, 20%% of R-J2")
}
