package private

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// TestMariaDBReplica_R_M1_FailoverHandsTheLostIDsOutAgain stages a
// failover of MariaDB to an asynchronous replica behind its primary: a row
// inserted before Detach is on the promoted replica, the rows inserted
// after it are not, and the promoted replica's AUTO_INCREMENT hands their
// IDs out again to the next inserts — what the dispatcher's marker guard
// is for (OutcomeRowReplaced).
func TestMariaDBReplica_R_M1_FailoverHandsTheLostIDsOutAgain(t *testing.T) {
	testutil.Integration(t)
	p := NewMariaDB(t)
	dsn := p.CreateDatabase("failover")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	insert := func(db *sql.DB, v string) int64 {
		t.Helper()
		res, err := db.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, v)
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		return id
	}
	_, err = db.ExecContext(ctx, `CREATE TABLE t (id bigint AUTO_INCREMENT PRIMARY KEY, v varchar(20))`)
	require.NoError(t, err)
	kept := insert(db, "before the replica")

	r := p.Replica(t)
	require.NoError(t, r.CaughtUp(p, time.Minute))
	_, err = r.Detach()
	require.NoError(t, err)
	lost := []int64{insert(db, "lost 1"), insert(db, "lost 2")}
	require.NoError(t, db.Close())
	require.NoError(t, p.Crash())
	require.NoError(t, r.Promote())

	rdb, err := sql.Open("mysql", r.DSN("failover"))
	require.NoError(t, err)
	defer rdb.Close()
	var n int
	require.NoError(t, rdb.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE id = ?`, kept).Scan(&n))
	require.Equal(t, 1, n, "the row inserted before the cut is on the new primary")
	require.NoError(t, rdb.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE id >= ?`, lost[0]).Scan(&n))
	require.Zero(t, n, "the rows inserted after the cut are lost")
	require.Equal(t, lost[0], insert(rdb, "after the failover"), "the new primary hands the first lost ID out again")
}
