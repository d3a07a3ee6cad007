package private

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// TestPostgres_R_H7_CrashKeepsCommittedRows: an immediate shutdown is a
// crash, and the restarted server on the same port and directory still has
// every committed row.
func TestPostgres_R_H7_CrashKeepsCommittedRows(t *testing.T) {
	testutil.Integration(t)
	p := NewPostgres(t)
	url := p.CreateDatabase("crash")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (7)`)
	require.NoError(t, err)
	require.NoError(t, p.Crash())
	require.Error(t, c.Ping(ctx), "the server is gone")
	_ = c.Close(ctx)
	require.NoError(t, p.Start())
	c, err = pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer c.Close(ctx)
	var v int
	require.NoError(t, c.QueryRow(ctx, `SELECT v FROM t`).Scan(&v))
	require.Equal(t, 7, v)
}

// TestMariaDB_R_H7_SIGKILLKeepsCommittedRows: SIGKILL is a crash; after
// InnoDB recovery the committed row is there.
func TestMariaDB_R_H7_SIGKILLKeepsCommittedRows(t *testing.T) {
	testutil.Integration(t)
	m := NewMariaDB(t)
	db, err := sql.Open("mysql", m.CreateDatabase("crash"))
	require.NoError(t, err)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = db.ExecContext(ctx, `CREATE TABLE t (v int) ENGINE=InnoDB; INSERT INTO t VALUES (7)`)
	require.NoError(t, err)
	require.NoError(t, m.Crash())
	require.False(t, m.Running())
	require.NoError(t, m.Start())
	var v int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT v FROM t`).Scan(&v), "the pool reconnects to the restarted server")
	require.Equal(t, 7, v)
}

// TestRedis_R_H7_RestartLosesEverything: a restarted Redis is empty, as a
// production Redis without persistence.
func TestRedis_R_H7_RestartLosesEverything(t *testing.T) {
	testutil.Integration(t)
	r := NewRedis(t)
	opt, err := redis.ParseURL(r.URL())
	require.NoError(t, err)
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, r.Crash())
	require.NoError(t, r.Start())
	n, err := c.Exists(ctx, "k").Result()
	require.NoError(t, err)
	require.Zero(t, n)
}
