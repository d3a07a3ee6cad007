package pgxutil

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// RegisterMetrics exports the statistics of pool as observable
// instruments, read from pool.Stat() at every collection and labelled
// pool=name:
//
//	msgx_pg_pool_connections{pool, state="acquired|idle|constructing"}
//	msgx_pg_pool_max_connections{pool}
//	msgx_pg_pool_acquires_total{pool}
//	msgx_pg_pool_empty_acquires_total{pool}     acquires that had to wait for a connection
//	msgx_pg_pool_canceled_acquires_total{pool}  acquires given up by their context
//	msgx_pg_pool_acquire_wait_seconds_total{pool}
//	msgx_pg_pool_new_connections_total{pool}
//	msgx_pg_pool_destroyed_connections_total{pool, reason="max_lifetime|max_idle"}
//
// A pool whose acquired connections stay at the maximum while empty
// acquires and the wait grow is too small for its load. Unregister the
// returned registration before closing the pool.
func RegisterMetrics(meter metric.Meter, pool *pgxpool.Pool, name string) (metric.Registration, error) {
	var errs []error
	gauge := func(n, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(n, metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(n, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(n, metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	conns := gauge("msgx_pg_pool_connections", "PostgreSQL pool connections, by state (acquired, idle, constructing).")
	maxConns := gauge("msgx_pg_pool_max_connections", "Largest number of connections the PostgreSQL pool opens.")
	acquires := counter("msgx_pg_pool_acquires_total", "Connections acquired from the PostgreSQL pool.")
	empty := counter("msgx_pg_pool_empty_acquires_total", "Acquires from the PostgreSQL pool that had to wait for a connection.")
	canceled := counter("msgx_pg_pool_canceled_acquires_total", "Acquires from the PostgreSQL pool given up because their context ended.")
	created := counter("msgx_pg_pool_new_connections_total", "Connections the PostgreSQL pool opened.")
	destroyed := counter("msgx_pg_pool_destroyed_connections_total", "Connections the PostgreSQL pool closed, by reason (max_lifetime, max_idle).")
	wait, err := meter.Float64ObservableCounter("msgx_pg_pool_acquire_wait_seconds", metric.WithUnit("s"),
		metric.WithDescription("Total time spent acquiring connections from the PostgreSQL pool."))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("creating postgres pool metrics: %w", err)
		}
	}
	poolAttr := attribute.String("pool", name)
	with := func(kv ...attribute.KeyValue) metric.ObserveOption {
		return metric.WithAttributes(append([]attribute.KeyValue{poolAttr}, kv...)...)
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := pool.Stat()
		o.ObserveInt64(conns, int64(s.AcquiredConns()), with(attribute.String("state", "acquired")))
		o.ObserveInt64(conns, int64(s.IdleConns()), with(attribute.String("state", "idle")))
		o.ObserveInt64(conns, int64(s.ConstructingConns()), with(attribute.String("state", "constructing")))
		o.ObserveInt64(maxConns, int64(s.MaxConns()), with())
		o.ObserveInt64(acquires, s.AcquireCount(), with())
		o.ObserveInt64(empty, s.EmptyAcquireCount(), with())
		o.ObserveInt64(canceled, s.CanceledAcquireCount(), with())
		o.ObserveInt64(created, s.NewConnsCount(), with())
		o.ObserveInt64(destroyed, s.MaxLifetimeDestroyCount(), with(attribute.String("reason", "max_lifetime")))
		o.ObserveInt64(destroyed, s.MaxIdleDestroyCount(), with(attribute.String("reason", "max_idle")))
		o.ObserveFloat64(wait, s.AcquireDuration().Seconds(), with())
		return nil
	}, conns, maxConns, acquires, empty, canceled, created, destroyed, wait)
	if err != nil {
		return nil, fmt.Errorf("registering postgres pool metrics: %w", err)
	}
	return reg, nil
}
