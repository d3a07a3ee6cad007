package relay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations/migratetest"
)

// TestSettle_R_M3_R_L2_PlansReadOnlyTheBatchsRows: the statements that
// record a batch of delivery attempts read only the batch's outbox rows,
// whatever the planner believes of the table. The trap: statistics
// gathered while few rows were pending, then a backlog (a broker or
// MariaDB outage, R-M3) of thousands of pending rows; a generic plan —
// which PostgreSQL may switch a prepared statement to after five
// executions — that estimates the pending rows at one scans all of them
// through the partial index outbox_pending_idx and probes the batch for
// each, so a backlog drains in time quadratic in its length.
func TestSettle_R_M3_R_L2_PlansReadOnlyTheBatchsRows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pending, batch = 12000, 256
	db := staleStatistics(ctx, t,
		`INSERT INTO outbox (target, pkey, payload, msg_id, state, sent_at)
			SELECT CASE WHEN g % 2 = 0 THEN 'msg' ELSE 'mailbox' END, g::text, NULL, g, 'SENT', now()
			FROM generate_series(1, `+fmt.Sprint(pending)+`) AS g`,
		// The backlog, unknown to the statistics.
		`UPDATE outbox SET state = 'PENDING', sent_at = NULL`)
	ids := make([]string, batch)
	for i := range ids {
		ids[i] = fmt.Sprint(pending - batch + 1 + i) // far down the backlog
	}
	idArray := "'{" + strings.Join(ids, ",") + "}'::bigint[]"
	fill := func(v, typ string) string { return fmt.Sprintf("array_fill(%s::%s, ARRAY[%d])", v, typ, batch) }
	at := fill("'2026-03-01T12:00:00Z'", "timestamptz")
	for _, st := range []struct {
		name string
		sql  string
		args []string
	}{
		{"kafka", settleQuery, []string{idArray, fill("'SENT'", "text"), fill("NULL", "text"), fill("NULL", "timestamptz"), at,
			"'{}'::bigint[]", fill("1", "int")}},
		{"mailbox", mailboxSettleQuery, []string{idArray, fill("'SENT'", "text"), fill("'marked'", "text"), fill("NULL", "text"),
			fill("NULL", "timestamptz"), at, "'abandoned'", fill("1", "int")}},
	} {
		t.Run(st.name, func(t *testing.T) {
			plan, err := pgtest.ExplainGeneric(ctx, db, st.sql, st.args...)
			require.NoError(t, err)
			read, nodes := plan.RowsScanned("outbox")
			require.LessOrEqual(t, read, float64(batch),
				"the %s settlement read %.0f outbox rows for a batch of %d: %v", st.name, read, batch, nodes)
			work, node := plan.MaxWork()
			require.LessOrEqual(t, work, float64(2*batch),
				"the %s settlement's node %s did work quadratic in the batch of %d", st.name, node, batch)
		})
	}
}

// TestSchd_R_M5_FlushPlanIsLinearInThePending: the schd flush's select
// does work linear in the pending rows, whatever the planner believes of
// the table. The trap is the one of a year of history (R-M5): statistics
// taken while no schd row was pending, then a backlog of thousands; a
// generic plan that estimates one pending row and one picked FLID ran the
// fresh floor's "pending FLIDs not picked" as a nested-loop anti join of
// every pending row against every picked one (9,337 × 1,000, 4.5 s a
// flush on the R-M5 bench's database).
func TestSchd_R_M5_FlushPlanIsLinearInThePending(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pending, limit = 6000, 1000
	db := staleStatistics(ctx, t,
		`INSERT INTO outbox (target, pkey, payload, state, sent_at, next_attempt_at, created_at)
			SELECT 'schd', (g % 3000)::text, '\x00', 'SENT', now(), now() - interval '1 minute', now()
			FROM generate_series(1, `+fmt.Sprint(pending)+`) AS g`,
		// The backlog, unknown to the statistics; every third row not due.
		`UPDATE outbox SET state = 'PENDING', sent_at = NULL,
			next_attempt_at = CASE WHEN id % 3 = 0 THEN now() + interval '1 hour' ELSE next_attempt_at END`,
		// in the fresh lane, as inserted (a move back to PENDING put them in the retry lane)
		`UPDATE outbox SET retry = false`)
	plan, err := pgtest.ExplainGeneric(ctx, db, schdSelect, "now()", fmt.Sprint(limit), "0")
	require.NoError(t, err)
	work, node := plan.MaxWork()
	require.LessOrEqual(t, work, float64(4*pending),
		"the schd flush's node %s did work quadratic in the %d pending rows", node, pending)
}

// staleStatistics returns a migrated database whose outbox statistics are
// taken after seed and before change: the planner's picture of a quiet
// table, then a backlog it knows nothing of. Autovacuum is off on outbox,
// so that no autoanalyze corrects the statistics behind the test's back.
func staleStatistics(ctx context.Context, t *testing.T, seed string, change ...string) *pgxpool.Pool {
	t.Helper()
	db, err := pgxpool.New(ctx, migratetest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	for _, sql := range append([]string{`ALTER TABLE outbox SET (autovacuum_enabled = false)`, seed, `ANALYZE outbox`}, change...) {
		_, err := db.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	return db
}
