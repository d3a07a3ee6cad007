package migrations_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations"
)

// TestUpDownUp applies every migration, rolls all back and applies them
// again against a real PostgreSQL, so every Down is proven to work.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	ctx, p, db := newProvider(t)
	_, err := p.Up(ctx)
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

// TestFenceKeyShare_R_M4_KeepsTheGrantsHardening: migration 00038 rewrites
// msgx_fence (FOR SHARE → FOR KEY SHARE) on a database where
// deploy/grants/postgres.sql already made it SECURITY DEFINER with a pinned
// search_path, as in production; neither its Up nor its Down may undo
// that, or the processor's and dispatcher's next fence fails with
// "permission denied for table lease".
func TestFenceKeyShare_R_M4_KeepsTheGrantsHardening(t *testing.T) {
	t.Parallel()
	ctx, p, db := newProvider(t)
	_, err := p.UpTo(ctx, 37)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `ALTER FUNCTION msgx_fence(text, bigint) SECURITY DEFINER SET search_path = public, pg_temp`)
	require.NoError(t, err)

	fence := func() (secdef bool, config, body string) {
		t.Helper()
		require.NoError(t, db.QueryRowContext(ctx, `SELECT prosecdef, array_to_string(proconfig, ';'), prosrc FROM pg_proc
			WHERE oid = 'msgx_fence(text, bigint)'::regprocedure`).Scan(&secdef, &config, &body))
		return secdef, config, body
	}
	_, err = p.UpTo(ctx, 38)
	require.NoError(t, err)
	secdef, config, body := fence()
	require.True(t, secdef, "SECURITY DEFINER kept")
	require.Equal(t, "search_path=public, pg_temp", config)
	require.Contains(t, body, "WHERE name = p_name FOR KEY SHARE;")

	_, err = p.DownTo(ctx, 37)
	require.NoError(t, err)
	secdef, config, body = fence()
	require.True(t, secdef, "SECURITY DEFINER kept")
	require.Equal(t, "search_path=public, pg_temp", config)
	require.Contains(t, body, "WHERE name = p_name FOR SHARE;")
	require.NotContains(t, body, "KEY SHARE")
}

// newProvider migrates nothing yet: it returns the migration provider of a
// new empty PostgreSQL database, its connection (closed when the test
// ends) and a context of a minute.
func newProvider(t *testing.T) (context.Context, *goose.Provider, *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	p, db, err := migrations.Provider(pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return ctx, p, db
}
