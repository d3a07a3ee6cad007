package migrations_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations"
)

// TestUpDownUp applies every migration, rolls all back and applies them
// again against a real PostgreSQL, so every Down is proven to work.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, db, err := migrations.Provider(url)
	require.NoError(t, err)
	defer db.Close()
	_, err = p.Up(ctx)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 0)
	require.NoError(t, err)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('proc_state','flight','outbox','consumer_offset','projection_pending','ref_data')").Scan(&n))
	require.Equal(t, 6, n)
}

// TestMailboxFixtureIsRepeatable creates the mailbox tables twice.
func TestMailboxFixtureIsRepeatable(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("mysql", mysqltest.NewDatabase(t))
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	require.NoError(t, migrations.ApplyMailboxFixture(ctx, db))
	require.NoError(t, migrations.ApplyMailboxFixture(ctx, db))
	_, err = db.ExecContext(ctx, "INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_STATUS) VALUES ('<MSG/>', 'VALID')")
	require.NoError(t, err)
}
