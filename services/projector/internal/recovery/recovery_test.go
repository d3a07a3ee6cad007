package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"msgexchange/libs/clock"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/services/projector/internal/pgsource"
	"msgexchange/services/projector/internal/pgsource/pgsourcetest"
	"msgexchange/services/projector/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 30 * time.Second

// testBundle is one test's projection: a Redis prefix, its store, a
// migrated PostgreSQL database and the metrics of the watchdogs started.
type testBundle struct {
	t      testing.TB
	rdb    *redis.Client
	prefix string
	store  *store.Store
	pg     *pgxpool.Pool
	src    *pgsource.Source
	reader *sdkmetric.ManualReader
	meter  *sdkmetric.MeterProvider
}

func setup(t *testing.T) *testBundle { return setupBench(t) }

func setupBench(t testing.TB) *testBundle {
	t.Helper()
	b := &testBundle{t: t, prefix: redistest.NewPrefix(t)}
	var err error
	b.rdb, err = redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.rdb.Close() })
	b.store = store.New(b.rdb, b.prefix)
	b.pg = pgsourcetest.NewPool(t)
	b.src = pgsource.New(b.pg, 10*time.Second)
	b.reader = sdkmetric.NewManualReader()
	b.meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader))
	t.Cleanup(func() { _ = b.meter.Shutdown(context.Background()) })
	return b
}

func (b *testBundle) options() Options {
	return Options{Interval: 20 * time.Millisecond, PageSize: 7, LockTTL: 10 * time.Second, RedisTimeout: 5 * time.Second,
		BackoffMax: 100 * time.Millisecond, Instance: "test"}
}

// run starts a watchdog on src until the test ends.
func (b *testBundle) run(src Source, opt Options) *Recovery {
	b.t.Helper()
	r, err := New(b.store, src, slog.New(slog.NewTextHandler(testWriter{b.t}, nil)), clock.Real{}, b.meter.Meter("projector"), opt)
	require.NoError(b.t, err)
	svc := r.Service()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(b.t, svc.Start(context.Background()))
	require.NoError(b.t, svc.AwaitRunning(ctx))
	b.t.Cleanup(func() {
		svc.StopAsync()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(b.t, svc.AwaitTerminated(ctx))
	})
	return r
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func (b *testBundle) awaitComplete() {
	b.t.Helper()
	require.Eventually(b.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return b.store.CheckComplete(ctx) == nil
	}, waitFor, 5*time.Millisecond)
}

// requireEqualsPostgres checks that Redis holds every flight at its
// PostgreSQL version: ACTIVE ones with their record, deleted ones with
// their version and no document.
func (b *testBundle) requireEqualsPostgres(flights []pgsourcetest.Flight) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := b.store.All(ctx)
	require.NoError(b.t, err)
	active := 0
	for _, f := range flights {
		v, ok, err := b.store.Version(ctx, f.FLID)
		require.NoError(b.t, err)
		require.True(b.t, ok, "flight %d has a version", f.FLID)
		require.Equal(b.t, f.Version, v, "flight %d", f.FLID)
		doc, err := b.store.Get(ctx, f.FLID)
		if f.Deleted {
			require.ErrorIs(b.t, err, store.ErrNotFound, "deleted flight %d", f.FLID)
			continue
		}
		active++
		require.NoError(b.t, err)
		require.Equal(b.t, string(f.Record(b.t)), string(doc), "flight %d", f.FLID)
	}
	require.Len(b.t, all, active)
}

// counter sums an Int64 counter's points whose attributes include attrs.
// requireCounter waits until the counter reaches want. A rebuild's
// outcome is counted after it marked the projection complete, so a test
// that has seen the marker may still have to wait for the count.
func (b *testBundle) requireCounter(want int64, name string, attrs ...attribute.KeyValue) {
	b.t.Helper()
	require.Eventually(b.t, func() bool { return b.counter(name, attrs...) == want }, waitFor, 5*time.Millisecond,
		"%s%v = %d", name, attrs, want)
	require.Equal(b.t, want, b.counter(name, attrs...), "%s%v", name, attrs)
}

func (b *testBundle) counter(name string, attrs ...attribute.KeyValue) int64 {
	b.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(b.t, b.reader.Collect(context.Background(), &rm))
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				match := true
				for _, a := range attrs {
					if v, ok := dp.Attributes.Value(a.Key); !ok || v != a.Value {
						match = false
					}
				}
				if match {
					sum += dp.Value
				}
			}
		}
	}
	return sum
}

// gauge returns the projection_complete gauge.
func (b *testBundle) gauge() float64 {
	b.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(b.t, b.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "msgx_projector_projection_complete" {
				return m.Data.(metricdata.Gauge[float64]).DataPoints[0].Value
			}
		}
	}
	b.t.Fatal("no msgx_projector_projection_complete gauge")
	return 0
}

func outcome(o Outcome) attribute.KeyValue { return attribute.String("outcome", string(o)) }

// R-H5: a projection Redis never had (first start) or lost (all keys
// deleted, as a restart without persistence leaves it) is rebuilt from
// PostgreSQL without anyone: every flight at its PostgreSQL version,
// deleted ones as versions without documents; the loss is counted and the
// gauge follows.
func TestRecovery_R_H5_RebuildsALostProjectionFromPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	flights := pgsourcetest.Mixed(40)
	pgsourcetest.Upsert(t, b.pg, flights...)
	b.run(b.src, b.options())
	b.awaitComplete()
	b.requireEqualsPostgres(flights)
	b.requireCounter(1, "msgx_projector_projection_losses_total", attribute.String("at", "startup"))
	b.requireCounter(1, "msgx_projector_recoveries_total", outcome(Completed))
	b.requireCounter(40, "msgx_projector_recovery_flights_total")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.rdb.Del(ctx, b.prefix+"flights", b.prefix+"flight-versions").Err())
	require.Eventually(t, func() bool {
		return b.counter("msgx_projector_projection_losses_total", attribute.String("at", "running")) == 1 &&
			b.counter("msgx_projector_recoveries_total", outcome(Completed)) == 2
	}, waitFor, 5*time.Millisecond)
	b.awaitComplete()
	b.requireEqualsPostgres(flights)
	require.Equal(t, 1.0, b.gauge())
}

// R-H5, INV-24: what the consumer wrote after the loss and is newer than
// the PostgreSQL page the rebuild read stays: the rebuild writes through
// the version guard and never sets a flight back.
func TestRecovery_R_H5_NewerWritesSurviveTheRebuild(t *testing.T) {
	t.Parallel()
	b := setup(t)
	flights := pgsourcetest.Mixed(10)
	pgsourcetest.Upsert(t, b.pg, flights...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	newer := pgsourcetest.NewFlight(4, 9)
	_, err := b.store.Apply(ctx, []store.Update{{FLID: 4, Version: 9, Value: newer.Record(t)}, {FLID: 11, Version: 1, Value: pgsourcetest.NewFlight(11, 1).Record(t)}})
	require.NoError(t, err)
	b.run(b.src, b.options())
	b.awaitComplete()
	doc, err := b.store.Get(ctx, 4)
	require.NoError(t, err)
	require.Equal(t, string(newer.Record(t)), string(doc), "the newer version is kept")
	_, err = b.store.Get(ctx, 11)
	require.NoError(t, err, "a flight written after the rebuild's pages is kept")
	flights[3] = newer
	b.requireEqualsPostgresExcept(flights, 11)
}

func (b *testBundle) requireEqualsPostgresExcept(flights []pgsourcetest.Flight, extra int64) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, f := range flights {
		v, _, err := b.store.Version(ctx, f.FLID)
		require.NoError(b.t, err)
		require.Equal(b.t, f.Version, v, "flight %d", f.FLID)
	}
	all, err := b.store.All(ctx)
	require.NoError(b.t, err)
	var flids []int64
	for _, f := range all {
		flids = append(flids, f.FLID)
	}
	require.Contains(b.t, flids, extra)
}

// lossySource loses the projection's data once, while the rebuild reads
// its second page, as a Redis restarting in the middle of a rebuild does.
type lossySource struct {
	Source
	pages atomic.Int32
	lose  func()
}

func (s *lossySource) Page(ctx context.Context, after int64, limit int) ([]store.Update, error) {
	if s.pages.Add(1) == 2 {
		s.lose()
	}
	return s.Source.Page(ctx, after, limit)
}

// R-H5: when Redis loses data again while the rebuild runs — the versions
// hash, the flights hash, or everything with the lock — the rebuild does
// not set the marker on what is left; it starts over and ends whole.
func TestRecovery_R_H5_LossDuringTheRebuildStartsItOver(t *testing.T) {
	t.Parallel()
	for _, keys := range [][]string{{"flight-versions"}, {"flights"}, {"flights", "flight-versions", "projection-rebuild-lock"}} {
		t.Run(fmt.Sprint(keys), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			flights := pgsourcetest.Mixed(30)
			pgsourcetest.Upsert(t, b.pg, flights...)
			src := &lossySource{Source: b.src, lose: func() {
				full := make([]string, len(keys))
				for i, k := range keys {
					full[i] = b.prefix + k
				}
				require.NoError(t, b.rdb.Del(context.Background(), full...).Err())
			}}
			b.run(src, b.options())
			b.awaitComplete()
			b.requireEqualsPostgres(flights)
			b.requireCounter(1, "msgx_projector_recoveries_total", outcome(Interrupted))
			b.requireCounter(1, "msgx_projector_recoveries_total", outcome(Completed))
		})
	}
}

// R-H5: several projector instances see the loss at once; one rebuilds
// under the lock, the others wait and serve the result.
func TestRecovery_R_H5_OneInstanceRebuildsAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	flights := pgsourcetest.Mixed(50)
	pgsourcetest.Upsert(t, b.pg, flights...)
	var reading sync.WaitGroup
	reading.Add(1)
	gate := make(chan struct{})
	var once sync.Once
	src := &gatedSource{Source: b.src, gate: gate, first: func() { once.Do(reading.Done) }}
	for i := range 3 {
		opt := b.options()
		opt.Instance = "instance-" + strconv.Itoa(i)
		b.run(src, opt)
	}
	reading.Wait()
	// One rebuild is reading PostgreSQL, holding the lock; the others
	// have checked many times meanwhile.
	require.Eventually(t, func() bool {
		return b.counter("msgx_projector_projection_losses_total") == 3
	}, waitFor, 5*time.Millisecond)
	close(gate)
	b.awaitComplete()
	b.requireEqualsPostgres(flights)
	require.Eventually(t, func() bool {
		return b.counter("msgx_projector_recoveries_total", outcome(Completed)) == 1
	}, waitFor, 5*time.Millisecond)
	require.Equal(t, int32(1), src.rebuilds.Load(), "one instance read PostgreSQL")
}

// gatedSource holds every page until gate is closed and counts the
// rebuilds that started (first pages).
type gatedSource struct {
	Source
	gate     chan struct{}
	first    func()
	rebuilds atomic.Int32
}

func (s *gatedSource) Page(ctx context.Context, after int64, limit int) ([]store.Update, error) {
	if after == -1<<63 {
		s.rebuilds.Add(1)
	}
	s.first()
	select {
	case <-s.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Source.Page(ctx, after, limit)
}

// R-H5: a failing PostgreSQL leaves the projection refused and is retried
// with backoff until it answers.
func TestRecovery_R_H5_FailedRebuildIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	flights := pgsourcetest.Mixed(5)
	pgsourcetest.Upsert(t, b.pg, flights...)
	src := &failingSource{Source: b.src}
	src.failures.Store(3)
	b.run(src, b.options())
	b.awaitComplete()
	b.requireEqualsPostgres(flights)
	b.requireCounter(3, "msgx_projector_recoveries_total", outcome(Failed))
	b.requireCounter(1, "msgx_projector_recoveries_total", outcome(Completed))
}

type failingSource struct {
	Source
	failures atomic.Int32
}

func (s *failingSource) Page(ctx context.Context, after int64, limit int) ([]store.Update, error) {
	if s.failures.Add(-1) >= 0 {
		return nil, fmt.Errorf("reading flights from postgresql: %w", context.DeadlineExceeded)
	}
	return s.Source.Page(ctx, after, limit)
}
