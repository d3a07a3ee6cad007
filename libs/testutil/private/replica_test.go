package private

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
)

// TestReplica_R_M1_FailoverLosesWhatTheReplicaDidNotReceive stages a
// failover to an asynchronous replica behind its primary: a row committed
// before Detach is on the promoted replica, one committed after it is not,
// and the promoted replica takes writes.
func TestReplica_R_M1_FailoverLosesWhatTheReplicaDidNotReceive(t *testing.T) {
	testutil.Integration(t)
	p := NewPostgres(t)
	url := p.CreateDatabase("failover")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (1)`)
	require.NoError(t, err)

	r := p.Replica(t)
	require.NoError(t, r.CaughtUp(p, time.Minute))
	_, err = r.Detach()
	require.NoError(t, err)
	_, err = c.Exec(ctx, `INSERT INTO t VALUES (2)`)
	require.NoError(t, err, "the primary commits without waiting for its asynchronous replica")
	_ = c.Close(ctx)
	require.NoError(t, p.Crash())
	require.NoError(t, r.Promote())

	rc, err := pgx.Connect(ctx, r.URL("failover"))
	require.NoError(t, err)
	defer rc.Close(ctx)
	var got []int32
	rows, err := rc.Query(ctx, `SELECT v FROM t ORDER BY v`)
	require.NoError(t, err)
	got, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	require.Equal(t, []int32{1}, got, "the commit after Detach is lost, the one before it kept")
	_, err = rc.Exec(ctx, `INSERT INTO t VALUES (3)`)
	require.NoError(t, err, "the promoted replica takes writes")
}
