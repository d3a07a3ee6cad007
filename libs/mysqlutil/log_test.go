package mysqlutil_test

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/mysqltest"
)

// TestOpen_R_N2_DriverLinesFollowTheProcessLogger: the driver's line about
// a pooled connection the server closed (here by KILL) goes to the logger
// given to Open, in its format, at WARN with component=mysql-driver — and
// not at all while that logger's level is ERROR, so that a level changed
// at run time on the admin port (R-N2) governs the driver too. Before, the
// driver wrote through slog.Default, whatever the process's format and
// level.
func TestOpen_R_N2_DriverLinesFollowTheProcessLogger(t *testing.T) {
	testutil.Integration(t)
	dsn := mysqltest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out testutil.LogBuffer
	level := new(slog.LevelVar)
	level.Set(slog.LevelError)
	db, err := mysqlutil.Open(ctx, mysqlutil.Config{DSN: dsn}, time.UTC, slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: level})))
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxIdleConns(1)
	db.SetMaxOpenConns(1)
	admin, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer admin.Close()

	// killIdle has the server end the pool's one idle connection and waits
	// until it is gone; the next use finds it closed and logs why.
	killIdle := func() {
		t.Helper()
		var id int64
		require.NoError(t, db.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id))
		_, err := admin.ExecContext(ctx, `KILL CONNECTION ?`, id)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			var n int
			return admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, id).Scan(&n) == nil && n == 0
		}, 30*time.Second, 20*time.Millisecond)
		require.NoError(t, db.PingContext(ctx), "the pool replaces the closed connection")
	}

	killIdle()
	require.NotContains(t, out.String(), "mysql-driver", "nothing below ERROR")

	level.Set(slog.LevelWarn)
	killIdle()
	require.Contains(t, out.String(), `"level":"WARN"`)
	require.Contains(t, out.String(), `"component":"mysql-driver"`)
	require.Contains(t, out.String(), "bad idle connection")
}
