package pgxutil_test

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/pgxutil"
	"msgexchange/libs/telemetry"
	"msgexchange/libs/testutil/pgtest"
)

// TestRegisterMetrics_R_I4_PoolStatistics: the pool's statistics are
// exported under its name, and follow the pool: a held connection is
// "acquired", a released one "idle", and a waiting acquire counts as
// empty.
func TestRegisterMetrics_R_I4_PoolStatistics(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxutil.Connect(ctx, pgxutil.Config{URL: url, MaxConns: 1})
	require.NoError(t, err)
	defer pool.Close()
	tel, err := telemetry.New(telemetry.Build{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Provider.Shutdown(context.Background()) })
	reg, err := pgxutil.RegisterMetrics(tel.Meter("postgres"), pool, "postgres")
	require.NoError(t, err)
	defer func() { require.NoError(t, reg.Unregister()) }()

	read := func() map[string]float64 {
		fams, err := tel.Gatherer().Gather()
		require.NoError(t, err)
		out := map[string]float64{}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, l := range m.GetLabel() {
					require.False(t, l.GetName() == "pool" && l.GetValue() != "postgres")
					if l.GetName() != "pool" {
						key += "{" + l.GetName() + "=" + l.GetValue() + "}"
					}
				}
				switch f.GetType() {
				case dto.MetricType_COUNTER:
					out[key] = m.GetCounter().GetValue()
				case dto.MetricType_GAUGE:
					out[key] = m.GetGauge().GetValue()
				}
			}
		}
		return out
	}
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	held := read()
	require.Equal(t, 1.0, held["msgx_pg_pool_connections{state=acquired}"])
	require.Equal(t, 0.0, held["msgx_pg_pool_connections{state=idle}"])
	require.Equal(t, 1.0, held["msgx_pg_pool_max_connections"])
	require.Contains(t, held, "msgx_pg_pool_destroyed_connections_total{reason=max_lifetime}")
	require.Contains(t, held, "msgx_pg_pool_canceled_acquires_total")
	require.Contains(t, held, "msgx_pg_pool_acquire_wait_seconds_total")
	require.GreaterOrEqual(t, held["msgx_pg_pool_new_connections_total"], 1.0)

	// An acquire that finds no idle connection is an empty acquire. Close
	// the only connection so the pool destroys it on release: the next
	// acquire must construct one. (Waiting in a goroutine for the held
	// connection raced with its release: puddle counts an empty acquire
	// only once it succeeds, so nothing shows that the goroutine waits.)
	require.NoError(t, conn.Conn().Close(ctx))
	conn.Release()
	conn, err = pool.Acquire(ctx)
	require.NoError(t, err)
	conn.Release()
	after := read()
	require.Equal(t, 0.0, after["msgx_pg_pool_connections{state=acquired}"])
	require.Equal(t, 1.0, after["msgx_pg_pool_connections{state=idle}"])
	require.Equal(t, held["msgx_pg_pool_acquires_total"]+1, after["msgx_pg_pool_acquires_total"])
	require.Equal(t, held["msgx_pg_pool_empty_acquires_total"]+1, after["msgx_pg_pool_empty_acquires_total"])
}
