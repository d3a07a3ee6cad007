package pgxutil_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/pgxutil"
	"msgexchange/libs/testutil/pgtest"
)

func TestConfig_R_M2_StatementAndLockTimeoutDefaultsAndValidate(t *testing.T) {
	t.Parallel()
	var c pgxutil.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags("postgres.", fs)
	require.Equal(t, 60*time.Second, c.StatementTimeout)
	require.Equal(t, 10*time.Second, c.LockTimeout)
	require.NoError(t, c.Validate())
	require.NoError(t, fs.Parse([]string{"-postgres.lock-timeout=-1s"}))
	require.ErrorContains(t, c.Validate(), "postgres.lock-timeout -1s")
	require.NoError(t, fs.Parse([]string{"-postgres.lock-timeout=1s", "-postgres.statement-timeout=-2s"}))
	require.ErrorContains(t, c.Validate(), "postgres.statement-timeout -2s")
}

// TestConnect_R_M2_LockAndStatementWaitsEnd: on a pool from Connect, a
// statement that waits for a row lock another session holds fails with
// lock_not_available (55P03) once LockTimeout passed, and a statement
// that runs past StatementTimeout is cancelled (57014) — neither waits
// for the holder or the statement to end by itself.
func TestConnect_R_M2_LockAndStatementWaitsEnd(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxutil.Connect(ctx, pgxutil.Config{URL: url, MaxConns: 2, LockTimeout: 300 * time.Millisecond, StatementTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer pool.Close()
	for name, want := range map[string]string{"lock_timeout": "300ms", "statement_timeout": "2s"} {
		var got string
		require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&got))
		require.Equal(t, want, got, name)
	}

	holder, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)`)
	require.NoError(t, err)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `SELECT id FROM t WHERE id=1 FOR UPDATE`)
	require.NoError(t, err)

	began := time.Now()
	_, err = pool.Exec(ctx, `UPDATE t SET id=1 WHERE id=1`)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, "55P03", pgErr.Code)
	require.Less(t, time.Since(began), 5*time.Second, "the lock wait ended at the lock timeout")

	began = time.Now()
	_, err = pool.Exec(ctx, `SELECT pg_sleep(20)`)
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, "57014", pgErr.Code)
	require.Less(t, time.Since(began), 10*time.Second, "the statement ended at the statement timeout")
}
