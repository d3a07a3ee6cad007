package relay

import (
	"context"
	"database/sql"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/migrations"
	"msgexchange/migrations/migratetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testNow is the fake clock's start in every bundle.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// airport is the mailbox zone of the tests.
var airport = mustZone("Asia/Shanghai")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// testBundle is a Relay on a fresh PostgreSQL database, a fresh mailbox
// database and its own broker, driven by a fake clock.
type testBundle struct {
	pgURL      string
	pool       *pgxpool.Pool
	mailbox    *sql.DB
	mailboxDSN string // the administrator's, on the test's own database
	kcfg       kafka.Config
	cluster    *kafkatest.Cluster
	clock      *clock.Fake
	r          *Relay
	log        *slog.Logger
}

// testOptions are the relay options of every bundle: small attempt limits
// so that DEAD is reached in a few steps, and a jitter source that takes
// nothing off, so that next attempts are exact.
func testOptions() Options {
	return Options{
		Batch: 500, MaxAttempts: 3, BackoffMin: time.Second, BackoffMax: 4 * time.Second,
		ProcessedValue: "PROCESSED", BackfillMaxAttempts: 3,
		BackfillBackoffMin: 30 * time.Second, BackfillBackoffMax: 15 * time.Minute,
		SchdFlushPeriod: 3 * time.Second, SchdFlushLimit: 500,
		Rand: func() float64 { return 0 }, // no jitter: exact next attempts
	}
}

func setup(t *testing.T, adjust ...func(*Options)) *testBundle {
	t.Helper()
	b := &testBundle{clock: clock.NewFake(testNow), log: testLogger(t)}
	b.pgURL = migratetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	b.pool, err = pgxpool.New(ctx, b.pgURL)
	require.NoError(t, err)
	t.Cleanup(b.pool.Close)

	b.mailboxDSN = mysqltest.NewDatabase(t)
	b.mailbox, err = mysqlutil.Open(ctx, mysqlutil.Config{DSN: b.mailboxDSN}, airport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.mailbox.Close() })
	require.NoError(t, migrations.ApplyMailboxFixture(ctx, b.mailbox))

	b.kcfg = kafkatest.DefaultConfig()
	b.cluster = kafkatest.NewCluster(t, &b.kcfg)

	opt := testOptions()
	opt.Logger, opt.Clock, opt.Pool, opt.Mailbox, opt.Kafka = b.log, b.clock, b.pool, b.mailbox, b.kcfg
	for _, a := range adjust {
		a(&opt)
	}
	b.r, err = New(opt)
	require.NoError(t, err)
	return b
}

// producer returns a production-configured producer whose default topic is
// topic, closed when the test ends: transactional, like a target's
// (producerOpts), with the topic standing for the target.
func (b *testBundle) producer(t *testing.T, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(b.r.producerOpts(topic, kgo.DefaultProduceTopic(topic))...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// failProduce makes every produce to topic fail with a non-retriable error
// that is not known to be final (class refused: counted, dead-lettered when
// the attempts run out) until the returned function is called.
func (b *testBundle) failProduce(topic string) (remove func()) {
	h := b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.UnknownServerError, Count: -1})
	return h.Remove
}

// drainAll drains target until a drain reports nothing more (a
// transaction carries one row of a key, so a key's versions take one
// drain each) and returns the last drain's error.
func (b *testBundle) drainAll(t *testing.T, cl *kgo.Client, target string) error {
	t.Helper()
	for {
		more, err := b.r.drainKafka(flushCtx(t), cl, target)
		if !more || err != nil {
			return err
		}
	}
}

// exec runs SQL on the bundle's PostgreSQL database.
func (b *testBundle) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.pool.Exec(ctx, q, args...)
	require.NoError(t, err)
}

// addRow inserts an outbox row due at the fake clock's now and returns its
// ID. A nil payload is a deletion (tombstone).
func (b *testBundle) addRow(t *testing.T, target, key string, payload []byte, headers string) int64 {
	t.Helper()
	var id int64
	var h any
	if headers != "" {
		h = headers
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at)
		VALUES ($1, $2, $3, $4::jsonb, NULL, $5, $5) RETURNING id`, target, key, payload, h, b.clock.Now()).Scan(&id))
	return id
}

// rowState is the state of one outbox row as the tests check it.
type rowState struct {
	State       string
	Attempts    int
	NextAttempt time.Time
	Outcome     string
	LastError   string
	SentAt      *time.Time
}

func (b *testBundle) row(t *testing.T, id int64) rowState {
	t.Helper()
	var r rowState
	var outcome, lastErr *string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state, attempts, next_attempt_at, outcome, last_error, sent_at FROM outbox WHERE id=$1`, id).
		Scan(&r.State, &r.Attempts, &r.NextAttempt, &outcome, &lastErr, &r.SentAt))
	if outcome != nil {
		r.Outcome = *outcome
	}
	if lastErr != nil {
		r.LastError = *lastErr
	}
	return r
}

// states returns the state of each row.
func (b *testBundle) states(t *testing.T, ids ...int64) []string {
	t.Helper()
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = b.row(t, id).State
	}
	return out
}

// consume reads topic from the start until n records arrived and returns
// them in partition order (per key, the produced order).
func (b *testBundle) consume(t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	return consumeTopic(t, b.kcfg, topic, n)
}

func consumeTopic(t *testing.T, kcfg kafka.Config, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kcfg.BrokerList()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "got %d of %d records from %s", len(out), n, topic)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// readCommitted returns every committed record of topic, in partition
// order, as a read_committed consumer sees it. It reads up to the end
// offsets listed at the start; transaction markers take offsets of their
// own, so the consumer keeps control records to see where it is and
// leaves them out of the result.
func readCommitted(t *testing.T, kcfg kafka.Config, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kcfg.BrokerList()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords())
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "reading %s to its end offsets", topic)
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// byKey groups records by key, keeping their order.
func byKey(recs []*kgo.Record) map[string][]*kgo.Record {
	out := map[string][]*kgo.Record{}
	for _, r := range recs {
		out[string(r.Key)] = append(out[string(r.Key)], r)
	}
	return out
}

// header returns a record header's value, "" when absent.
func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// state is a flight-state payload of version v for flid.
func state(flid, v int) []byte {
	return []byte(`{"schema":1,"flid":` + strconv.Itoa(flid) + `,"version":` + strconv.Itoa(v) + `,"state":"ACTIVE","msg_id":` + strconv.Itoa(100+v) + `,"doc":{"STND":"S` + strconv.Itoa(v) + `"}}`)
}

// versionHeaders are the schd/flight-state headers of version v.
func versionHeaders(v int) string {
	return `{"msgx-version":"` + strconv.Itoa(v) + `","msgx-msg-id":"` + strconv.Itoa(100+v) + `"}`
}

// testLogger writes to the test's log until the test has ended; later
// lines (a client closing) are dropped.
func testLogger(t *testing.T) *slog.Logger { return testutil.Logger(t, slog.LevelInfo) }
