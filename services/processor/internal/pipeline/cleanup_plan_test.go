package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations/migratetest"
)

// TestCleanup_R_M5_SweptDeletionsReadWhatTheyDelete: a batch of the
// cleanup's deletion of delivered sweep deletions reads the rows it
// deletes, not every sweep deletion of the retention. The trap: 20,000
// sweep deletions inside the retention, 100 older ones due, fewer than a
// batch — the last batch of every run; under the statement's generic plan
// it read all 20,100 through outbox_msg_idx's NULL entries (1.9 s with a
// year of history, R-M5) before outbox_swept_sent_idx (migration 00037).
func TestCleanup_R_M5_SweptDeletionsReadWhatTheyDelete(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := pgxpool.New(ctx, migratetest.NewDatabase(t))
	require.NoError(t, err)
	defer db.Close()
	const due, kept, batch = 100, 20000, 1000
	for _, sql := range []string{
		`ALTER TABLE outbox SET (autovacuum_enabled = false)`,
		// The due ones first: the oldest rows lead the table and the NULL
		// entries of outbox_msg_idx.
		`INSERT INTO outbox (target, pkey, payload, msg_id, state, sent_at)
			SELECT 'msg', g::text, NULL, NULL, 'SENT', '2026-01-01T00:00:00Z'::timestamptz + g * interval '1 second'
			FROM generate_series(1, 100) AS g`,
		`INSERT INTO outbox (target, pkey, payload, msg_id, state, sent_at)
			SELECT CASE WHEN g % 2 = 0 THEN 'msg' ELSE 'flight-state' END, g::text, NULL, NULL, 'SENT',
				'2026-03-01T00:00:00Z'::timestamptz + g * interval '1 second'
			FROM generate_series(1, 20000) AS g`,
		`ANALYZE outbox`,
	} {
		_, err := db.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	plan, err := pgtest.ExplainGeneric(ctx, db, sweptDeletionDelete, "'2026-02-01T00:00:00Z'::timestamptz", "1000")
	require.NoError(t, err)
	read, nodes := plan.RowsScanned("outbox")
	require.LessOrEqual(t, read, float64(2*due),
		"a batch deleting %d of %d sweep deletions read %.0f outbox rows: %v", due, due+kept, read, nodes)
	work, node := plan.MaxWork()
	require.LessOrEqual(t, work, float64(2*due), "%s", node)
}
