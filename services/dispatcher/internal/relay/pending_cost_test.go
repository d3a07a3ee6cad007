package relay

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// explainBuffers runs q under EXPLAIN (ANALYZE, BUFFERS) and returns the
// shared buffers (hit + read) its plan touched.
func (b *testBundle) explainBuffers(t *testing.T, q string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := b.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) "+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	re := regexp.MustCompile(`Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?`)
	total, first := 0, true
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
		// The first Buffers line is the plan's root: everything below it.
		if m := re.FindStringSubmatch(line); m != nil && first {
			first = false
			for _, g := range m[1:] {
				if g != "" {
					n, _ := strconv.Atoi(g)
					total += n
				}
			}
		}
	}
	require.NoError(t, rows.Err())
	if testing.Verbose() && total > 50 {
		t.Logf("%d buffers:\n%s", total, joinLines(plan))
	}
	return total
}

func joinLines(ls []string) string {
	out := ""
	for _, l := range ls {
		out += l + "\n"
	}
	return out
}

// pendingCost is the buffers the drains' and nextDue's queries touch for
// the msg and mailbox targets at the relay's current floors.
func (b *testBundle) pendingCost(t *testing.T) int {
	t.Helper()
	now := b.clock.Now()
	msgFloor, mbFloor := b.r.floors.peek(TargetMsg), b.r.floors.peek(TargetMailbox)
	return b.explainBuffers(t, kafkaFreshQuery, TargetMsg, now, msgFloor, b.r.opt.Batch) +
		b.explainBuffers(t, kafkaRetryQuery, TargetMsg, now, b.r.opt.Batch) +
		b.explainBuffers(t, nextDueQuery, TargetMsg, msgFloor) +
		b.explainBuffers(t, mailboxFreshQuery, now, mbFloor, b.r.opt.Batch) +
		b.explainBuffers(t, mailboxRetryQuery, now, b.r.opt.Batch)
}

// addPending inserts n rows of target msg (keys cycling over 1,000 FLIDs)
// and n marker intents for mailbox rows that exist, all due now.
func (b *testBundle) addPending(t *testing.T, n int) {
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

// TestPendingQueryCost_R_J5_IndependentOfDeliveredHistory: with
// autovacuum off on the outbox, 50,000 msg rows and 50,000 markers are
// delivered by the relay's own drains; finding the next pending rows then
// costs what it costs on a fresh table, not what the delivered history
// left behind (issue 11 item 4: a rebuild slowed to 20 flights/s until a
// manual VACUUM). The same queries from floor 0 — what a scan of the
// pending partial index used to do — are measured too, to show that the
// history really left its dead entries in place.
func TestPendingQueryCost_R_J5_IndependentOfDeliveredHistory(t *testing.T) {
	t.Parallel()
	const delivered, waiting = 50_000, 10
	fresh := setup(t)
	fresh.exec(t, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	fresh.r.floors.listening(true)
	fresh.addPending(t, waiting)
	freshCost := fresh.pendingCost(t)

	b := setup(t)
	b.exec(t, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	b.exec(t, `ALTER TABLE proc_state SET (autovacuum_enabled = false)`)
	// The drains run as under a connected listener: every insert of this
	// test commits before the drain that could pass it.
	b.r.floors.listening(true)
	b.addPending(t, delivered)
	cl := b.producer(t, b.kcfg.Topics.Msg)
	for {
		more, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg)
		require.NoError(t, err)
		if !more {
			break
		}
	}
	for {
		more, err := b.r.DrainMailbox(flushCtx(t))
		require.NoError(t, err)
		if !more {
			break
		}
	}
	var left int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE state <> 'SENT'`).Scan(&left))
	require.Zero(t, left, "every row delivered")
	var dead int64
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'outbox'`).Scan(&dead))
	t.Logf("outbox dead tuples after delivery (no vacuum): %d", dead)

	b.addPending(t, waiting)
	historyCost := b.pendingCost(t)
	t.Logf("buffers to find %d pending rows: fresh table %d, after %d delivered %d", waiting, freshCost, 2*delivered, historyCost)
	require.LessOrEqual(t, historyCost, 2*freshCost+20,
		"finding pending rows must not cost more after %d deliveries than on a fresh table", 2*delivered)

	// Not vacuous: from floor 0 the same lanes walk the delivered history.
	now := b.clock.Now()
	fromZero := b.explainBuffers(t, kafkaFreshQuery, TargetMsg, now, 0, b.r.opt.Batch) +
		b.explainBuffers(t, mailboxFreshQuery, now, 0, b.r.opt.Batch)
	t.Logf("the same fresh-lane queries from floor 0: %d buffers", fromZero)
	require.Greater(t, fromZero, 5*historyCost, "the delivered history left dead index entries behind")
}
