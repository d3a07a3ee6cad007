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
	seedRelayWork(t, fresh, waiting)
	freshCost := fresh.pendingCost(t)

	b := setup(t)
	b.exec(t, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	b.exec(t, `ALTER TABLE proc_state SET (autovacuum_enabled = false)`)
	// The drains run as under a connected listener: every insert of this
	// test commits before the drain that could pass it.
	b.r.floors.listening(true)
	seedRelayWork(t, b, delivered)
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

	seedRelayWork(t, b, waiting)
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
