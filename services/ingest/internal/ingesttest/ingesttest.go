// Package ingesttest holds the test fixtures the ingest packages share: a
// mailbox database with the adapter's tables on the real MySQL/MariaDB, a
// Kafka-protocol broker with the system's topics, a consumer of the inbox
// topic, an in-memory metric reader and a logger writing to the test log.
// It is imported by tests only.
package ingesttest

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"msgexchange/libs/kafka"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/migrations"
)

// Zone is the airport zone the tests use.
const Zone = "Asia/Shanghai"

// Location loads Zone.
func Location(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(Zone)
	require.NoError(t, err)
	return loc
}

// Mailbox is a test mailbox database.
type Mailbox struct {
	// DB is the pool, opened as production opens it.
	DB *sql.DB
	// DSN is the database's DSN (multiStatements on).
	DSN string
	// Name is the database name.
	Name string
}

// NewMailbox creates a fresh database with CMINMSGS and COUTMSGS.
func NewMailbox(t testing.TB) *Mailbox {
	t.Helper()
	dsn := mysqltest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := mysqlutil.Open(ctx, mysqlutil.Config{DSN: dsn}, Location(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, migrations.ApplyMailboxFixture(ctx, db))
	var name string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name))
	return &Mailbox{DB: db, DSN: dsn, Name: name}
}

// Row is a CMINMSGS row to insert.
type Row struct {
	ID       int64 // 0: AUTO_INCREMENT
	Msg      string
	Status   string // "" writes NULL
	Marked   bool
	Received string // DATETIME text, "" writes NULL
}

// Insert writes r and returns its ID.
func (m *Mailbox) Insert(t testing.TB, r Row) int64 {
	t.Helper()
	var id, status, received, processed any
	if r.ID != 0 {
		id = r.ID
	}
	if r.Status != "" {
		status = r.Status
	}
	if r.Received != "" {
		received = r.Received
	}
	if r.Marked {
		processed = "2021-01-23 00:00:00"
	}
	res, err := m.DB.ExecContext(context.Background(),
		"INSERT INTO CMINMSGS (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS) VALUES (?, ?, ?, ?, ?)",
		id, r.Msg, received, processed, status)
	require.NoError(t, err)
	got, err := res.LastInsertId()
	require.NoError(t, err)
	return got
}

// InsertValid writes n unmarked VALID rows with messages "<MSG n="i"/>"
// and returns their IDs.
func (m *Mailbox) InsertValid(t testing.TB, n int) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	for i := 0; i < n; i++ {
		ids = append(ids, m.Insert(t, Row{Msg: fmt.Sprintf(`<MSG n="%d"/>`, i), Status: "VALID", Received: "2021-01-23 05:35:00"}))
	}
	return ids
}

// Mark sets the processed marker of ids as the dispatcher would.
func (m *Mailbox) Mark(t testing.TB, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		_, err := m.DB.ExecContext(context.Background(),
			"UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NOW(), CMINMSGS_STATUS = 'PROCESSED' WHERE CMINMSGS_ID = ?", id)
		require.NoError(t, err)
	}
}

// Exec runs a statement.
func (m *Mailbox) Exec(t testing.TB, q string, args ...any) {
	t.Helper()
	_, err := m.DB.ExecContext(context.Background(), q, args...)
	require.NoError(t, err)
}

// Count returns the number of CMINMSGS rows matching where.
func (m *Mailbox) Count(t testing.TB, where string) int {
	t.Helper()
	var n int
	require.NoError(t, m.DB.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM CMINMSGS WHERE "+where).Scan(&n))
	return n
}

// NewKafka starts a broker with the system's topics.
func NewKafka(t testing.TB) kafka.Config {
	t.Helper()
	cfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &cfg)
	return cfg
}

// NewProducer returns a producer for the inbox topic configured as the
// service configures its own.
func NewProducer(t testing.TB, cfg kafka.Config) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(cfg.ClientOpts(slog.New(slog.DiscardHandler), "ingest-test"),
		kgo.DefaultProduceTopic(cfg.Topics.Inbox), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// Inbox reads msgx.inbox from the start.
type Inbox struct {
	cfg    kafka.Config
	client *kgo.Client
	mu     sync.Mutex
	got    []*kgo.Record
}

// NewInbox returns a consumer of the inbox topic.
func NewInbox(t testing.TB, cfg kafka.Config) *Inbox {
	t.Helper()
	cl, err := kgo.NewClient(append(cfg.ClientOpts(slog.New(slog.DiscardHandler), "ingest-test-inbox"), kgo.ConsumeTopics(cfg.Topics.Inbox),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return &Inbox{cfg: cfg, client: cl}
}

// Await polls until at least n records were read in total (since the
// Inbox was created) and returns all of them, failing after timeout.
func (in *Inbox) Await(t testing.TB, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for len(in.got) < n {
		fs := in.client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("waiting for %d inbox records: got %d before %s", n, len(in.got), timeout)
		}
		require.NoError(t, fs.Err0())
		fs.EachRecord(func(r *kgo.Record) { in.got = append(in.got, r) })
	}
	return append([]*kgo.Record(nil), in.got...)
}

// EndOffset returns the number of records in the inbox partition. Produce
// is synchronous in the scanner, so after a round returns this is exact.
func (in *Inbox) EndOffset(t testing.TB) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(in.client)
	offs, err := adm.ListEndOffsets(ctx, in.cfg.Topics.Inbox)
	require.NoError(t, err)
	o, ok := offs.Lookup(in.cfg.Topics.Inbox, 0)
	require.True(t, ok)
	require.NoError(t, o.Err)
	return o.Offset
}

// Keys returns the decimal keys of rs as IDs.
func Keys(t testing.TB, rs []*kgo.Record) []int64 {
	t.Helper()
	out := make([]int64, len(rs))
	for i, r := range rs {
		id, err := strconv.ParseInt(string(r.Key), 10, 64)
		require.NoError(t, err)
		out[i] = id
	}
	return out
}

// Header returns the value of header key of r and whether it is present.
func Header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// Metrics is an in-memory meter.
type Metrics struct {
	Meter  metric.Meter
	reader *sdkmetric.ManualReader
}

// NewMetrics returns a meter read by a manual reader.
func NewMetrics(t testing.TB) *Metrics {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &Metrics{Meter: mp.Meter("msgexchange/ingest-test"), reader: reader}
}

// Counter returns the sum of an Int64 counter over all attribute sets (0
// when it was never incremented).
func (m *Metrics) Counter(t testing.TB, name string) int64 {
	t.Helper()
	return m.int64Sum(t, name)
}

// Gauge returns the value of an int64 gauge, summed over its attribute
// sets (0 when it was never observed).
func (m *Metrics) Gauge(t testing.TB, name string) int64 {
	t.Helper()
	return m.int64Sum(t, name)
}

// int64Sum sums the points of the int64 counter or gauge name.
func (m *Metrics) int64Sum(t testing.TB, name string) int64 {
	t.Helper()
	var total int64
	m.each(t, name, func(data metricdata.Aggregation) {
		var points []metricdata.DataPoint[int64]
		switch d := data.(type) {
		case metricdata.Sum[int64]:
			points = d.DataPoints
		case metricdata.Gauge[int64]:
			points = d.DataPoints
		default:
			t.Fatalf("%s is not an int64 counter or gauge but %T", name, data)
		}
		for _, dp := range points {
			total += dp.Value
		}
	})
	return total
}

// HistogramCount returns the number of observations of a float64
// histogram over all attribute sets.
func (m *Metrics) HistogramCount(t testing.TB, name string) uint64 {
	t.Helper()
	var total uint64
	m.each(t, name, func(data metricdata.Aggregation) {
		if h, ok := data.(metricdata.Histogram[float64]); ok {
			for _, dp := range h.DataPoints {
				total += dp.Count
			}
		}
	})
	return total
}

// each collects the metrics and calls fn with the data of every
// instrument named name.
func (m *Metrics) each(t testing.TB, name string, fn func(metricdata.Aggregation)) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, m.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if md.Name == name {
				fn(md.Data)
			}
		}
	}
}

// Logger returns a logger writing to the test log until the test's
// cleanups end.
func Logger(t testing.TB) *slog.Logger {
	t.Helper()
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
