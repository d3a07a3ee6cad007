package dispatcher_test

import (
	"context"
	"database/sql"
	"flag"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/mysqltest"
	"msgexchange/migrations"
	"msgexchange/migrations/migratetest"
	"msgexchange/services/dispatcher"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func defaults() dispatcher.Config {
	var c dispatcher.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags("dispatcher.", fs)
	return c
}

// TestConfig_R_D1_SchdDefaultsAndValidation: schd.flush-period 3s and
// schd.flush-limit 500 by default; non-positive values refuse to start.
func TestConfig_R_D1_SchdDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	c := defaults()
	require.Equal(t, 3*time.Second, c.Schd.FlushPeriod)
	require.Equal(t, 500, c.Schd.FlushLimit)
	require.NoError(t, c.Validate())

	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var f dispatcher.Config
	f.RegisterFlags("dispatcher.", fs)
	require.NoError(t, fs.Parse([]string{"-dispatcher.schd.flush-period=250ms", "-dispatcher.schd.flush-limit=20"}))
	require.Equal(t, 250*time.Millisecond, f.Schd.FlushPeriod)
	require.Equal(t, 20, f.Schd.FlushLimit)

	tests := []struct {
		name   string
		adjust func(*dispatcher.Config)
		want   string
	}{
		{"ZeroFlushPeriod", func(c *dispatcher.Config) { c.Schd.FlushPeriod = 0 }, "schd.flush-period"},
		{"ZeroFlushLimit", func(c *dispatcher.Config) { c.Schd.FlushLimit = 0 }, "schd.flush-limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := defaults()
			tc.adjust(&c)
			require.ErrorContains(t, c.Validate(), tc.want)
		})
	}
}

// TestConfig_R_L2_RetriesAtLeastOnceAMinute: a target is retried at least
// once a minute (delivery.backoff-max 1m by default, more refused) and
// markers at least every backfill-outage-retry-max (5s by default, at most
// 1m) while the mailbox is unreachable.
func TestConfig_R_L2_RetriesAtLeastOnceAMinute(t *testing.T) {
	t.Parallel()
	c := defaults()
	require.Equal(t, time.Minute, c.Delivery.BackoffMax)
	require.Equal(t, 5*time.Second, c.Mailbox.BackfillOutageRetryMax)
	require.NoError(t, c.Validate())
	c.Delivery.BackoffMax = 2 * time.Minute
	require.ErrorContains(t, c.Validate(), "max <= 1m")
	c = defaults()
	c.Mailbox.BackfillOutageRetryMax = 0
	require.ErrorContains(t, c.Validate(), "pipeline.backfill-outage-retry-max")
	c.Mailbox.BackfillOutageRetryMax = 90 * time.Second
	require.ErrorContains(t, c.Validate(), "pipeline.backfill-outage-retry-max")
}

// testBundle is a running dispatcher (every loop, real clock) on fresh
// databases and its own broker.
type testBundle struct {
	pool    *pgxpool.Pool
	mailbox *sql.DB
	// mailboxDSN is the administrator's, on the test's own database.
	mailboxDSN string
	kcfg       kafka.Config
	cluster    *kafkatest.Cluster
	svc        *dispatcher.Service
	// ran gets what the dispatcher's run returned, when it ended by
	// itself; a test that reads it sets ended.
	ran   <-chan error
	ended bool
}

func setup(t *testing.T, adjust func(*dispatcher.Config), adjustDeps ...func(*testBundle, *dispatcher.Deps)) *testBundle {
	t.Helper()
	log := testLogger(t)
	b := &testBundle{}
	pgURL := migratetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	b.pool, err = pgxpool.New(ctx, pgURL)
	require.NoError(t, err)
	t.Cleanup(b.pool.Close)
	b.mailboxDSN = mysqltest.NewDatabase(t)
	b.mailbox, err = mysqlutil.Open(ctx, mysqlutil.Config{DSN: b.mailboxDSN}, time.UTC, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.mailbox.Close() })
	require.NoError(t, migrations.ApplyMailboxFixture(ctx, b.mailbox))
	b.kcfg = kafkatest.DefaultConfig()
	b.cluster = kafkatest.NewCluster(t, &b.kcfg)

	cfg := defaults()
	cfg.Schd.FlushPeriod = 50 * time.Millisecond
	if adjust != nil {
		adjust(&cfg)
	}
	deps := dispatcher.Deps{
		Logger: log, Clock: clock.Real{}, Postgres: b.pool, Mailbox: b.mailbox, Kafka: b.kcfg,
	}
	for _, a := range adjustDeps {
		a(b, &deps)
	}
	b.svc, err = dispatcher.New(cfg, deps)
	require.NoError(t, err)
	m := lifecycle.NewManager(log, b.svc.Services()...)
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	b.ran = done
	t.Cleanup(func() {
		rcancel()
		if !b.ended {
			require.NoError(t, <-done)
		}
	})
	require.Eventually(t, func() bool { return m.Ready() == nil }, 10*time.Second, 5*time.Millisecond, "dispatcher did not start")
	require.NoError(t, b.svc.Ready(ctx))
	return b
}

func (b *testBundle) addRow(t *testing.T, target, key string, payload []byte, msgID any) int64 {
	t.Helper()
	var id int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO outbox (target, pkey, payload, headers, msg_id) VALUES ($1, $2, $3, '{"msgx-version":"1"}', $4) RETURNING id`,
		target, key, payload, msgID).Scan(&id))
	return id
}

func (b *testBundle) row(t *testing.T, id int64) (state string, attempts int) {
	t.Helper()
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state, attempts FROM outbox WHERE id=$1`, id).Scan(&state, &attempts))
	return state, attempts
}

func (b *testBundle) waitRow(t *testing.T, id int64, what string, cond func(state string, attempts int) bool) {
	t.Helper()
	require.Eventually(t, func() bool { return cond(b.row(t, id)) }, 20*time.Second, 10*time.Millisecond, what)
}

// TestDispatcher_R_D2_FailingTargetsDoNotStopOthers: while every produce to
// schd and to msgx.flight-state fails, msg rows keep flowing; when the
// broker accepts them again, the failed targets catch up on their own
// (R-D2 per-target isolation, R-D1, R-D3).
//
// Validation 001§6 INV-10 "投递确认丢失、批次失败、次数耗尽"; 002§8 "投递确认丢失、批次失败、次数耗尽".
// Validation 001§6 INV-16 "外部副作用失败后本地结果不变".
func TestDispatcher_R_D2_FailingTargetsDoNotStopOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var handles []*kfake.FaultHandle
	for _, topic := range []string{b.kcfg.Topics.Schd, b.kcfg.Topics.FlightState} {
		handles = append(handles, b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.UnknownServerError, Count: -1}))
	}
	schd := b.addRow(t, "schd", "15", []byte(`{"flid":15,"version":1}`), nil)
	fs := b.addRow(t, "flight-state", "15", []byte(`{"flid":15,"version":1}`), nil)
	b.waitRow(t, schd, "schd row failed once", func(s string, a int) bool { return s == "PENDING" && a >= 1 })
	b.waitRow(t, fs, "flight-state row failed once", func(s string, a int) bool { return s == "PENDING" && a >= 1 })

	msg := b.addRow(t, "msg", "15", []byte(`{"event_id":"flight-15-v1"}`), nil)
	b.waitRow(t, msg, "msg row sent while the others fail", func(s string, _ int) bool { return s == "SENT" })
	recs := consume(t, b.kcfg, b.kcfg.Topics.Msg, 1)
	require.Equal(t, "15", string(recs[0].Key))
	st, _ := b.row(t, schd)
	require.Equal(t, "PENDING", st)

	for _, h := range handles {
		h.Remove()
	}
	b.waitRow(t, schd, "schd row sent after recovery", func(s string, _ int) bool { return s == "SENT" })
	b.waitRow(t, fs, "flight-state row sent after recovery", func(s string, _ int) bool { return s == "SENT" })
	require.Equal(t, "15", string(consume(t, b.kcfg, b.kcfg.Topics.Schd, 1)[0].Key))
}

// TestDispatcher_R_D4_R_L6_ShadowModeNeverWritesMarkers: in shadow mode the
// dispatcher relays Kafka targets, and its marker loop settles the intent
// as shadowed without writing the mailbox row, so a mailbox row is never
// marked and no intent stays pending (R-D4, R-L6).
//
// Validation 001§6 INV-7 "回填四种结果"; 002§8 "回填四种结果".
func TestDispatcher_R_D4_R_L6_ShadowModeNeverWritesMarkers(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dispatcher.Config) { c.Shadow = true })

	res, err := b.mailbox.Exec(`INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_STATUS) VALUES ('<MSG/>', 'VALID')`)
	require.NoError(t, err)
	msgID, err := res.LastInsertId()
	require.NoError(t, err)
	intent := b.addRow(t, "mailbox", "1", nil, msgID)
	msg := b.addRow(t, "msg", "15", []byte(`{}`), msgID)
	schd := b.addRow(t, "schd", "15", []byte(`{}`), msgID)
	// The notification that woke the Kafka loops was seen by every loop.
	b.waitRow(t, msg, "msg row sent", func(s string, _ int) bool { return s == "SENT" })
	b.waitRow(t, schd, "schd row sent", func(s string, _ int) bool { return s == "SENT" })
	b.waitRow(t, intent, "intent settled", func(s string, _ int) bool { return s == "SENT" })

	var outcome string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT outcome FROM outbox WHERE id=$1`, intent).Scan(&outcome))
	require.Equal(t, "shadowed", outcome)
	var processed sql.NullTime
	var status string
	require.NoError(t, b.mailbox.QueryRow(`SELECT CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS FROM CMINMSGS WHERE CMINMSGS_ID=?`, msgID).Scan(&processed, &status))
	require.False(t, processed.Valid)
	require.Equal(t, "VALID", status)
}

func consume(t *testing.T, kcfg kafka.Config, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kcfg.BrokerList()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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

// testLogger writes to the test's log until the test has ended.
func testLogger(t *testing.T) *slog.Logger { return testutil.Logger(t, slog.LevelInfo) }
