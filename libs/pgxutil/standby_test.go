package pgxutil_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/pgxutil"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/private"
)

// TestConnect_R_M1_RefusesAStandby: a pool from Connect takes no session
// on a server that refuses writes — a hot standby, where a name or address
// can lead for a while after a failover — so the service sees an outage
// (a connect error) instead of sessions whose every write fails with
// SQLSTATE 25006; once the standby is promoted the same pool connects. A
// URL with its own target_session_attrs keeps it.
func TestConnect_R_M1_RefusesAStandby(t *testing.T) {
	testutil.Integration(t)
	primary := private.NewPostgres(t)
	primary.CreateDatabase("msgx")
	standby := primary.Replica(t)
	require.NoError(t, standby.CaughtUp(primary, time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := pgxutil.Connect(ctx, pgxutil.Config{URL: standby.URL("msgx")})
	require.Error(t, err, "a standby is refused")
	var connErr *pgconn.ConnectError
	require.True(t, errors.As(err, &connErr), "a connect error, which the services treat as an outage: %v", err)
	require.ErrorIs(t, err, pgconn.ErrReadOnlyConnection)

	explicit, err := pgxutil.Connect(ctx, pgxutil.Config{URL: standby.URL("msgx") + "&target_session_attrs=any"})
	require.NoError(t, err, "the URL's own target_session_attrs is kept")
	explicit.Close()

	require.NoError(t, primary.Crash())
	require.NoError(t, standby.Promote())
	pool, err := pgxutil.Connect(ctx, pgxutil.Config{URL: standby.URL("msgx")})
	require.NoError(t, err, "promoted, it takes writes")
	defer pool.Close()
	_, err = pool.Exec(ctx, `CREATE TABLE t (v int)`)
	require.NoError(t, err)
}
