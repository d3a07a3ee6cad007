package projector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/migrations/migratetest"
	"msgexchange/services/projector"
)

const (
	waitFor = 30 * time.Second
	tick    = 10 * time.Millisecond
)

// testBundle is one test's world: its own broker, Redis prefix, metrics
// and clients to produce flight-state records and read acks.
type testBundle struct {
	t        *testing.T
	kcfg     kafka.Config
	cluster  *kafkatest.Cluster
	prefix   string
	rdb      *redis.Client
	pgURL    string
	pg       *pgxpool.Pool
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
	logger   *slog.Logger
	producer *kgo.Client
	adm      *kadm.Client
	acks     *ackLog
	cfg      projector.Config
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{t: t, kcfg: kafkatest.DefaultConfig()}
	b.prefix = redistest.NewPrefix(t)
	b.cluster = kafkatest.NewCluster(t, &b.kcfg)
	var err error
	b.rdb, err = redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.rdb.Close() })
	b.pgURL = migratetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	b.pg, err = pgxpool.New(ctx, b.pgURL)
	require.NoError(t, err)
	t.Cleanup(b.pg.Close)
	b.reader = sdkmetric.NewManualReader()
	b.provider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader))
	t.Cleanup(func() { _ = b.provider.Shutdown(context.Background()) })
	b.logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b.producer, err = kgo.NewClient(b.kcfg.ClientOpts(slog.New(slog.DiscardHandler), "test-producer")...)
	require.NoError(t, err)
	t.Cleanup(b.producer.Close)
	b.adm = kadm.NewClient(b.producer)
	b.acks = newAckLog(t, b.kcfg)
	b.cfg = defaultConfig()
	b.cfg.BackoffMax = 200 * time.Millisecond
	b.cfg.WatchdogInterval = 50 * time.Millisecond
	return b
}

func defaultConfig() projector.Config {
	var c projector.Config
	c.RegisterFlags("projector.", newFlagSet())
	return c
}

// testWriter sends log lines to t.Log, shown only for failing tests or -v.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// downRedis is a client of an address nothing listens on: every command
// fails at once, as when Redis is down.
func downRedis(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newService builds a projector on rdb without starting it.
func (b *testBundle) newService(rdb *redis.Client) *projector.Service {
	b.t.Helper()
	svc, err := projector.New(b.cfg, projector.Deps{
		Logger:    b.logger,
		Clock:     clock.Real{},
		Meter:     b.provider.Meter("projector"),
		Redis:     rdb,
		Postgres:  b.pg,
		KeyPrefix: b.prefix,
		Kafka:     b.kcfg,
	})
	require.NoError(b.t, err)
	return svc
}

// start builds and starts a projector on rdb and returns a function that
// stops it (also called at cleanup).
func (b *testBundle) start(rdb *redis.Client) (*projector.Service, func()) {
	b.t.Helper()
	svc := b.newService(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, s := range svc.Services() {
		require.NoError(b.t, s.Start(context.Background()))
		require.NoError(b.t, s.AwaitRunning(ctx))
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			for _, s := range svc.Services() {
				s.StopAsync()
				require.NoError(b.t, s.AwaitTerminated(ctx))
			}
		})
	}
	b.t.Cleanup(stop)
	return svc, stop
}

// awaitReady waits until svc is ready: Redis holds the whole projection
// (the first start builds it from PostgreSQL) and Kafka answers.
func (b *testBundle) awaitReady(svc *projector.Service) {
	b.t.Helper()
	require.EventuallyWithT(b.t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		assert.NoError(c, svc.Ready(ctx), "projector not ready")
	}, waitFor, tick)
}

func flightDoc(flid, version int64) []byte {
	return fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":%d,"state":"ACTIVE","operation_day":"2021-01-23","msg_id":%d,"doc":{"FLNO":"MU%04d","v":%d}}`,
		flid, version, 1000+version, flid, version)
}

func valueRecord(topic string, flid, version int64) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: strconv.AppendInt(nil, flid, 10), Value: flightDoc(flid, version)}
}

func tombstone(topic string, flid, version int64) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: strconv.AppendInt(nil, flid, 10), Headers: []kgo.RecordHeader{
		{Key: "msgx-version", Value: strconv.AppendInt(nil, version, 10)},
		{Key: "msgx-msg-id", Value: []byte("77")},
	}}
}

func (b *testBundle) produce(recs ...*kgo.Record) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(b.t, b.producer.ProduceSync(ctx, recs...).FirstErr())
}

func (b *testBundle) topic() string { return b.kcfg.Topics.FlightState }

// stored returns the flight's document in Redis, or nil.
func (b *testBundle) stored(flid int64) []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	v, err := b.rdb.HGet(ctx, b.prefix+"flights", strconv.FormatInt(flid, 10)).Bytes()
	if err == redis.Nil {
		return nil
	}
	require.NoError(b.t, err)
	return v
}

// storedVersion returns the flight's version in Redis, or -1.
func (b *testBundle) storedVersion(flid int64) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	v, err := b.rdb.HGet(ctx, b.prefix+"flight-versions", strconv.FormatInt(flid, 10)).Int64()
	if err == redis.Nil {
		return -1
	}
	require.NoError(b.t, err)
	return v
}

// committed returns the group's committed offsets summed over partitions
// (0 when nothing is committed, -1 when the broker could not answer; it is
// polled from require.Eventually, so it must not fail the test itself).
func (b *testBundle) committed() int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	offs, err := b.adm.FetchOffsets(ctx, b.cfg.Group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		b.t.Logf("fetching committed offsets: %v", err)
		return -1
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == b.topic() && o.At > 0 {
			sum += o.At
		}
	})
	return sum
}

// ackEndOffset returns how many acks were ever produced.
func (b *testBundle) ackEndOffset() int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	ends, err := b.adm.ListEndOffsets(ctx, b.kcfg.Topics.ProjectionAcks)
	require.NoError(b.t, err)
	var sum int64
	ends.Each(func(o kadm.ListedOffset) {
		require.NoError(b.t, o.Err)
		sum += o.Offset
	})
	return sum
}

// counter returns the summed value of an Int64 counter over the points
// whose attributes include every key/value pair of kv.
func (b *testBundle) counter(name string, kv ...string) int64 {
	b.t.Helper()
	var rm metricdata.ResourceMetrics
	assert.NoError(b.t, b.reader.Collect(context.Background(), &rm))
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				match := true
				for i := 0; i+1 < len(kv); i += 2 {
					if v, ok := dp.Attributes.Value(attribute.Key(kv[i])); !ok || v.Emit() != kv[i+1] {
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

// gauge returns the value of a Float64 gauge and whether it was reported.
func (b *testBundle) gauge(name string) (float64, bool) {
	b.t.Helper()
	var rm metricdata.ResourceMetrics
	assert.NoError(b.t, b.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				dps := m.Data.(metricdata.Gauge[float64]).DataPoints
				if len(dps) == 1 {
					return dps[0].Value, true
				}
			}
		}
	}
	return 0, false
}

type ack struct {
	FLID    int64 `json:"flid"`
	Version int64 `json:"version"`
}

// ackLog reads msgx.projection-acks from the start with its own client.
type ackLog struct {
	t   *testing.T
	cl  *kgo.Client
	got []ack
}

func newAckLog(t *testing.T, kcfg kafka.Config) *ackLog {
	cl, err := kgo.NewClient(append(kcfg.ClientOpts(slog.New(slog.DiscardHandler), "test-acks"),
		kgo.ConsumeTopics(kcfg.Topics.ProjectionAcks),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return &ackLog{t: t, cl: cl}
}

func (a *ackLog) poll() {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	fs := a.cl.PollFetches(ctx)
	fs.EachRecord(func(r *kgo.Record) {
		// assert, not require: this runs inside require.Eventually.
		var v ack
		assert.NoError(a.t, json.Unmarshal(r.Value, &v))
		assert.Equal(a.t, strconv.FormatInt(v.FLID, 10), string(r.Key), "ack key is the FLID")
		a.got = append(a.got, v)
	})
}

// has reports whether an ack of exactly (flid, version) was received.
func (a *ackLog) has(flid, version int64) bool {
	a.poll()
	for _, g := range a.got {
		if g.FLID == flid && g.Version == version {
			return true
		}
	}
	return false
}

// maxVersion returns the highest acked version per FLID.
func (a *ackLog) maxVersion() map[int64]int64 {
	a.poll()
	m := make(map[int64]int64)
	for _, g := range a.got {
		m[g.FLID] = max(m[g.FLID], g.Version)
	}
	return m
}

// redisProxy forwards TCP to the test Redis and can be switched off, which
// drops every open connection and refuses new ones: a Redis outage without
// touching the shared Redis server.
type redisProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	up     bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newRedisProxy(t *testing.T) (*redisProxy, *redis.Client) {
	t.Helper()
	opt, err := redis.ParseURL(redistest.URL())
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &redisProxy{ln: ln, target: opt.Addr, up: true, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.set(false)
		p.wg.Wait()
	})
	opt.Addr = ln.Addr().String()
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.DialerRetryTimeout = time.Millisecond
	opt.DialTimeout = 2 * time.Second
	opt.ReadTimeout = 2 * time.Second
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return p, rdb
}

func (p *redisProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		up := p.up
		if up {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if !up {
			_ = c.Close()
			continue
		}
		up2, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			p.drop(c)
			continue
		}
		p.mu.Lock()
		p.conns[up2] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up2)
		go p.pipe(up2, c)
	}
}

func (p *redisProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	p.drop(dst)
	p.drop(src)
}

func (p *redisProxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// set switches the proxy on or off; off closes every open connection.
func (p *redisProxy) set(up bool) {
	p.mu.Lock()
	p.up = up
	var open []net.Conn
	if !up {
		for c := range p.conns {
			open = append(open, c)
		}
	}
	p.mu.Unlock()
	for _, c := range open {
		p.drop(c)
	}
}
