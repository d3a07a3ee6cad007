package procstate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/pgtest"
)

// TestTransitions_R_M5_R_J2_PlansReadOnlyTheBatchsRows: a transition
// statement reads only its batch's rows of proc_state and
// projection_pending, whatever the planner believes of the table. The
// trap it guards against: statistics gathered while few messages were
// open (autoanalyze on a quiet table), then a backlog of thousands of
// open messages; after five executions PostgreSQL may switch a prepared
// statement to its generic plan, which — estimating the open rows at one
// and the unnest at a hundred — scans every open row through the partial
// index proc_state_open_idx and probes the batch for each: a 256-message
// batch over 12,000 open messages took 10 s, and a backlog drained in time
// quadratic in its length. Each statement here runs under that generic
// plan on such a table.
func TestTransitions_R_M5_R_J2_PlansReadOnlyTheBatchsRows(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const open, batch = 12000, 256
	for _, sql := range []string{
		// No autoanalyze may correct the statistics behind the test's back.
		`ALTER TABLE proc_state SET (autovacuum_enabled = false)`,
		`ALTER TABLE projection_pending SET (autovacuum_enabled = false)`,
		`INSERT INTO proc_state (msg_id, raw, kafka_offset, state, registered_at, updated_at, finished_at)
			SELECT g, '<MSG/>', g, 'SUCCEEDED', now(), now(), now() FROM generate_series(1, ` + fmt.Sprint(open) + `) AS g`,
		`ANALYZE proc_state`,
		`ANALYZE projection_pending`,
		// The backlog, unknown to the statistics.
		`UPDATE proc_state SET state = 'PENDING', finished_at = NULL`,
		`INSERT INTO projection_pending (msg_id, flid, version)
			SELECT g, g, 1 FROM generate_series(` + fmt.Sprint(open-batch+1) + `, ` + fmt.Sprint(open) + `) AS g`,
	} {
		_, err := db.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	// The batch: the last messages, as a head far down a backlog.
	ids := make([]string, batch)
	for i := range ids {
		ids[i] = fmt.Sprint(open - batch + 1 + i)
	}
	idArray := "'{" + strings.Join(ids, ",") + "}'::bigint[]"
	fill := func(v, typ string) string { return fmt.Sprintf("array_fill(%s::%s, ARRAY[%d])", v, typ, batch) }
	text := func(v string) string { return fill("'"+v+"'", "text") }
	at := fill("'2026-03-01T12:00:00Z'", "timestamptz")
	for _, st := range []struct {
		name string
		sql  string
		args []string // SQL expressions: EXECUTE takes no bind parameters
	}{
		{"apply", applySQL, []string{idArray, text(""), at, text("S"), text("T"), text("ST"), text("1"), text("D"), fill("NULL", "text")}},
		{"fail", failSQL, []string{idArray, text("INFRA"), text("r"), fill("1", "int"), at, at}},
		{"finish", finishSQL, []string{idArray, text("SUCCEEDED"), fill("NULL", "text"), text(""), at,
			text("S"), text("T"), text("ST"), text("1"), text("D"), fill("NULL", "text"), fill("NULL", "int"),
			"'{}'::text[]", "'{}'::text[]", "'{}'::bytea[]", "'{}'::text[]", "'{}'::bigint[]", "'{}'::timestamptz[]"}},
		{"end", endSQL, []string{idArray, text("OPERATOR"), text("r"), "'2026-03-01T12:00:00Z'::timestamptz"}},
	} {
		t.Run(st.name, func(t *testing.T) {
			plan, err := pgtest.ExplainGeneric(ctx, db, st.sql, st.args...)
			require.NoError(t, err)
			for _, rel := range []string{"proc_state", "projection_pending"} {
				read, nodes := plan.RowsScanned(rel)
				require.LessOrEqual(t, read, float64(batch),
					"the %s statement read %.0f rows of %s for a batch of %d: %v", st.name, read, rel, batch, nodes)
			}
			work, node := plan.MaxWork()
			require.LessOrEqual(t, work, float64(2*batch),
				"the %s statement's node %s did work quadratic in the batch of %d", st.name, node, batch)
		})
	}
}
