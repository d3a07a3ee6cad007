package sentinel

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/services/projector/internal/pgsource"
	"msgexchange/services/projector/internal/pgsource/pgsourcetest"
	"msgexchange/services/projector/internal/store"
	"msgexchange/services/projector/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 30 * time.Second

type testBundle struct {
	t       *testing.T
	rdb     *redis.Client
	prefix  string
	store   *store.Store
	pg      *pgxpool.Pool
	src     *pgsource.Source
	reader  *sdkmetric.ManualReader
	meter   *sdkmetric.MeterProvider
	flights []pgsourcetest.Flight
}

// setup builds a complete projection of n flights equal to PostgreSQL.
func setup(t *testing.T, n int) *testBundle {
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
	b.flights = pgsourcetest.Mixed(n)
	pgsourcetest.Upsert(t, b.pg, b.flights...)
	storetest.Complete(t, b.store)
	updates := make([]store.Update, len(b.flights))
	for i, f := range b.flights {
		updates[i] = store.Update{FLID: f.FLID, Version: f.Version, Value: f.Record(t)}
	}
	_, err = b.store.Apply(ctxT(t), updates)
	require.NoError(t, err)
	return b
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func (b *testBundle) sentinel(src Source, opt Options) *Sentinel {
	b.t.Helper()
	s, err := New(b.store, src, slog.New(slog.NewTextHandler(testWriter{b.t}, nil)), b.meter.Meter("projector"), opt)
	require.NoError(b.t, err)
	return s
}

func (b *testBundle) options() Options {
	return Options{DailySampleRatio: 0.01, MinSample: 1000, Poll: 10 * time.Millisecond, RedisTimeout: 5 * time.Second,
		BackoffMax: 100 * time.Millisecond}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
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

func kind(k Kind) attribute.KeyValue { return attribute.String("kind", string(k)) }

// corrupt damages the projection the ways the sentinel must find, without
// touching the document count (the watchdog's business): flight 1's
// version set back (behind), flight 2's document changed at its version
// (differs), flight 3's version lost (missing), flight 5 (deleted) given a
// document, flight 7 set ahead of PostgreSQL.
func (b *testBundle) corrupt() {
	b.t.Helper()
	ctx := ctxT(b.t)
	f := func(flid int64) pgsourcetest.Flight { return b.flights[flid-1] }
	versions, flights := b.prefix+"flight-versions", b.prefix+"flights"
	require.NoError(b.t, b.rdb.HSet(ctx, versions, "1", f(1).Version-1).Err())
	require.NoError(b.t, b.rdb.HSet(ctx, flights, "2", `{"schema":1,"flid":2,"doc":{"changed":"by hand"}}`).Err())
	require.NoError(b.t, b.rdb.HDel(ctx, versions, "3").Err())
	require.NoError(b.t, b.rdb.HDel(ctx, flights, "4").Err())
	require.NoError(b.t, b.rdb.HSet(ctx, flights, "5", pgsourcetest.NewFlight(5, f(5).Version).Record(b.t)).Err())
	require.NoError(b.t, b.rdb.HSet(ctx, versions, "7", f(7).Version+5).Err())
}

func (b *testBundle) requireFlightEqualsPostgres(flid int64) {
	b.t.Helper()
	ctx := ctxT(b.t)
	f := b.flights[flid-1]
	v, ok, err := b.store.Version(ctx, flid)
	require.NoError(b.t, err)
	require.True(b.t, ok)
	require.Equal(b.t, f.Version, v, "flight %d", flid)
	doc, err := b.rdb.HGet(ctx, b.prefix+"flights", strconv.FormatInt(flid, 10)).Result()
	if f.Deleted {
		require.ErrorIs(b.t, err, redis.Nil, "deleted flight %d has no document", flid)
		return
	}
	require.NoError(b.t, err)
	require.Equal(b.t, string(f.Record(b.t)), doc, "flight %d", flid)
}

// R-H5: a check compares the sample with Redis, repairs every flight that
// is missing, behind or differs from PostgreSQL, reports (never rewrites)
// one that Redis holds ahead, and counts all of it; the next check finds
// only what it may not repair.
func TestSentinel_R_H5_RepairsWhatDiffersAndReportsAhead(t *testing.T) {
	t.Parallel()
	b := setup(t, 30)
	s := b.sentinel(b.src, b.options())
	res, err := s.Check(ctxT(t), Periodic)
	require.NoError(t, err)
	require.Equal(t, 30, res.Sampled)
	require.Empty(t, res.FLIDs, "a consistent projection has no divergence")

	b.corrupt()
	// Flight 4 lost its document (the count no longer matches; the
	// watchdog would rebuild): the sentinel repairs it as missing all the
	// same.
	res, err = s.Check(ctxT(t), Periodic)
	require.NoError(t, err)
	require.Equal(t, int64(30), res.Flights)
	require.Equal(t, map[Kind]int{Behind: 1, Differs: 2, Missing: 2, Ahead: 1}, res.Divergent)
	require.Equal(t, 5, res.Repaired)
	require.ElementsMatch(t, []int64{1, 2, 3, 4, 5, 7}, res.FLIDs)
	for _, flid := range []int64{1, 2, 3, 4, 5} {
		b.requireFlightEqualsPostgres(flid)
	}
	v, _, err := b.store.Version(ctxT(t), 7)
	require.NoError(t, err)
	require.Equal(t, b.flights[6].Version+5, v, "Redis ahead is not set back")

	require.Equal(t, int64(60), b.counter("msgx_projector_consistency_sampled_flights_total"))
	require.Equal(t, int64(5), b.counter("msgx_projector_consistency_repaired_flights_total"))
	require.Equal(t, int64(1), b.counter("msgx_projector_consistency_divergent_flights_total", kind(Behind)))
	require.Equal(t, int64(2), b.counter("msgx_projector_consistency_divergent_flights_total", kind(Differs)))
	require.Equal(t, int64(2), b.counter("msgx_projector_consistency_divergent_flights_total", kind(Missing)))
	require.Equal(t, int64(1), b.counter("msgx_projector_consistency_divergent_flights_total", kind(Ahead)))

	res, err = s.Check(ctxT(t), Periodic)
	require.NoError(t, err)
	require.Equal(t, map[Kind]int{Ahead: 1}, res.Divergent)
	require.Zero(t, res.Repaired)
	require.Equal(t, int64(3), b.counter("msgx_projector_consistency_checks_total",
		attribute.String("trigger", "periodic"), attribute.String("outcome", "done")))
}

// changingSource moves flight 7 forward in PostgreSQL just before the
// sentinel re-reads it, as a message processed between the two reads does.
type changingSource struct {
	Source
	change func()
}

func (s changingSource) Versions(ctx context.Context, flids []int64) (map[int64]pgsource.Version, error) {
	s.change()
	return s.Source.Versions(ctx, flids)
}

// R-H5: a flight that looks ahead in Redis only because it changed in
// PostgreSQL between the sample and the Redis read is judged against
// PostgreSQL's newer version, and is not reported.
func TestSentinel_R_H5_AheadIsJudgedAgainstAFreshRead(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	newer := pgsourcetest.NewFlight(7, b.flights[6].Version+1)
	_, err := b.store.Apply(ctxT(t), []store.Update{{FLID: 7, Version: newer.Version, Value: newer.Record(t)}})
	require.NoError(t, err)
	s := b.sentinel(changingSource{Source: b.src, change: func() { pgsourcetest.Upsert(t, b.pg, newer) }}, b.options())
	res, err := s.Check(ctxT(t), Periodic)
	require.NoError(t, err)
	require.Empty(t, res.Divergent)
	require.Zero(t, b.counter("msgx_projector_consistency_divergent_flights_total"))
}

// R-H5: flights changed within the settle time are not sampled: Redis
// being behind them is the pipeline's normal lag.
func TestSentinel_R_H5_RecentChangesAreNotJudged(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	_, err := b.pg.Exec(ctxT(t), `UPDATE flight SET updated_at = now() - interval '1 hour' WHERE flid <= 6`)
	require.NoError(t, err)
	b.corrupt() // flight 7 ahead is among the recent ones
	opt := b.options()
	opt.Settle = time.Minute
	res, err := b.sentinel(b.src, opt).Check(ctxT(t), Periodic)
	require.NoError(t, err)
	require.Equal(t, int64(6), res.Flights)
	require.Equal(t, 6, res.Sampled)
	require.NotContains(t, res.Divergent, Ahead)
}

// R-H5: the check at start runs once the projection is complete (never on
// one being rebuilt), then the periodic checks follow.
func TestSentinel_R_H5_ChecksAtStartupAndPeriodically(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	ctx := ctxT(t)
	require.NoError(t, b.rdb.HDel(ctx, b.prefix+"flight-versions", store.CompleteField).Err())
	b.corrupt()
	opt := b.options()
	opt.OnStartup, opt.Interval = true, 20*time.Millisecond
	s := b.sentinel(b.src, opt)
	svc := s.Service()
	require.NoError(t, svc.Start(context.Background()))
	require.NoError(t, svc.AwaitRunning(ctx))
	t.Cleanup(func() {
		svc.StopAsync()
		require.NoError(t, svc.AwaitTerminated(context.Background()))
	})
	require.Zero(t, b.counter("msgx_projector_consistency_checks_total"), "no check while the projection is incomplete")
	storetest.Complete(t, b.store)
	require.Eventually(t, func() bool {
		return b.counter("msgx_projector_consistency_checks_total", attribute.String("trigger", "startup")) == 1 &&
			b.counter("msgx_projector_consistency_checks_total", attribute.String("trigger", "periodic")) >= 2
	}, waitFor, 5*time.Millisecond)
	require.Equal(t, int64(5), b.counter("msgx_projector_consistency_repaired_flights_total"))
	for _, flid := range []int64{1, 2, 3, 4, 5} {
		b.requireFlightEqualsPostgres(flid)
	}
}

// R-H5; seed 000 §6 daily-sample-ratio: a day's periodic checks add up to
// the ratio, the check at start takes a day's share, at least min-sample
// (never more than there are).
func TestSentinel_R_H5_SampleSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opt      Options
		flights  int64
		trigger  Trigger
		wantSize int
	}{
		{name: "HourlyShareOfADay", opt: Options{DailySampleRatio: 0.24, Interval: time.Hour}, flights: 100000, trigger: Periodic, wantSize: 1000},
		{name: "StartupTakesADaysShare", opt: Options{DailySampleRatio: 0.01, Interval: time.Hour}, flights: 100000, trigger: Startup, wantSize: 1000},
		{name: "AtLeastMinSample", opt: Options{DailySampleRatio: 0.01, Interval: time.Hour, MinSample: 100}, flights: 100000, trigger: Periodic, wantSize: 100},
		{name: "RoundedUp", opt: Options{DailySampleRatio: 0.01, Interval: time.Hour}, flights: 100, trigger: Periodic, wantSize: 1},
		{name: "NeverMoreThanThereAre", opt: Options{DailySampleRatio: 0.01, MinSample: 100}, flights: 40, trigger: Startup, wantSize: 40},
		{name: "NoFlights", opt: Options{DailySampleRatio: 0.01, MinSample: 100}, flights: 0, trigger: Startup, wantSize: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &Sentinel{opt: tc.opt}
			require.Equal(t, tc.wantSize, s.sampleSize(tc.flights, tc.trigger))
		})
	}
}
