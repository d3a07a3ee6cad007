package pgxutil_test

import (
	"context"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/libs/pgxutil"
	"msgexchange/libs/testutil/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfig_IdleInTxTimeoutDefaultAndValidate(t *testing.T) {
	t.Parallel()
	var c pgxutil.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags("postgres.", fs)
	require.Equal(t, pgxutil.DefaultIdleInTxTimeout, c.IdleInTxTimeout)
	require.Equal(t, 10*time.Second, c.IdleInTxTimeout)
	require.NoError(t, c.Validate())
	require.NoError(t, fs.Parse([]string{"-postgres.idle-in-tx-timeout=-1s"}))
	require.ErrorContains(t, c.Validate(), "postgres.idle-in-tx-timeout -1s")
}

// TestConnect_R_B8_IdleInTxTimeoutEndsIdleTransactions: every connection of
// a pool from Connect carries idle_in_transaction_session_timeout, and
// PostgreSQL ends a session left idle inside a transaction — the backstop
// that frees a paused lease holder's locks — so its COMMIT fails.
func TestConnect_R_B8_IdleInTxTimeoutEndsIdleTransactions(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pool, err := pgxutil.Connect(ctx, pgxutil.Config{URL: url, MaxConns: 2, IdleInTxTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer pool.Close()
	var setting string
	require.NoError(t, pool.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&setting))
	require.Equal(t, "300ms", setting)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	var pid int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))

	observer, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer observer.Close()
	require.Eventually(t, func() bool {
		var n int
		return observer.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid=$1`, pid).Scan(&n) == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond, "the idle transaction's session was not ended")
	require.Error(t, tx.Commit(ctx))

	// Zero keeps the server's setting.
	plain, err := pgxutil.Connect(ctx, pgxutil.Config{URL: url})
	require.NoError(t, err)
	defer plain.Close()
	var serverDefault string
	require.NoError(t, observer.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&serverDefault))
	require.NoError(t, plain.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&setting))
	require.Equal(t, serverDefault, setting)
}

// TestConnect_ApplicationNameUnlessTheURLSetsOne: the pool's sessions
// carry Config.ApplicationName, so that pg_stat_activity and a lock's
// blockers name the service; an application_name in the URL (the
// operator's choice) wins.
func TestConnect_ApplicationNameUnlessTheURLSetsOne(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct{ url, want string }{
		{url, "msgx processor,dispatcher"},
		{url + "&application_name=site-choice", "site-choice"},
	} {
		pool, err := pgxutil.Connect(ctx, pgxutil.Config{URL: c.url, MaxConns: 1, ApplicationName: "msgx processor,dispatcher"})
		require.NoError(t, err)
		var got string
		err = pool.QueryRow(ctx, `SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&got)
		pool.Close()
		require.NoError(t, err)
		require.Equal(t, c.want, got)
	}
}
