package pipeline

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"msgexchange/libs/clock"
	"msgexchange/libs/config"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/migrations/migratetest"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control"
)

// zombieToken is the control plane's bearer token in the zombie test.
const zombieToken = "zombie-test-token-0123456789"

// termWatch wraps an Elector and reports how each term of the wrapped
// function ended.
type termWatch struct {
	inner Elector
	ended chan error
}

func (w *termWatch) Run(ctx context.Context, name, holder string, fn func(context.Context, int64) error) error {
	return w.inner.Run(ctx, name, holder, func(ctx context.Context, token int64) error {
		err := fn(ctx, token)
		select {
		case w.ended <- err:
		default:
		}
		return err
	})
}

// zombieBundle is a control plane, a broker and processors on one
// database.
type zombieBundle struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
	addr string
}

func newZombieBundle(t *testing.T) *zombieBundle {
	t.Helper()
	url := migratetest.NewDatabase(t)
	b := &zombieBundle{t: t, url: url, pool: b0pool(t, url)}
	var cfg control.Config
	fs := flag.NewFlagSet("control", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags("control.", fs)
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.AuthToken = config.Secret(zombieToken)
	cfg.ShutdownTimeout = 5 * time.Second
	svc, err := control.New(cfg, control.Deps{Logger: testLogger(t, "control"), Postgres: b0pool(t, url)})
	require.NoError(t, err)
	runManager(t, lifecycle.NewManager(testLogger(t, "control"), svc.Services()...))
	b.addr = svc.GRPCAddr()
	return b
}

func b0pool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func testLogger(t *testing.T, component string) *slog.Logger {
	return slog.New(slog.NewTextHandler(tLog{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", component)
}

// runManager runs m until the test ends and waits for it to be ready.
func runManager(t *testing.T, m *lifecycle.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Error("manager did not stop")
			}
		})
	}
	t.Cleanup(stop)
	require.Eventually(t, func() bool { return m.Ready() == nil }, 30*time.Second, 5*time.Millisecond, "not ready")
	return stop
}

// offsetClock runs at the real pace from base: a processor's rows carry
// times of its own year, and its backoffs still pass.
type offsetClock struct {
	base  time.Time
	start time.Time
}

func (c offsetClock) Now() time.Time { return c.base.Add(time.Since(c.start)) }

// processor starts a processor engine under the real lease with clk, so
// that every row it writes is recognisable by its times. retry is how long
// its elector waits between acquire attempts, and after a fenced term before
// it campaigns again.
func (b *zombieBundle) processor(kcfg kafka.Config, holder string, clk clock.Clock, ttl, retry time.Duration) (*termWatch, func()) {
	b.t.Helper()
	client, err := lease.Dial(b.addr, zombieToken)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = client.Close() })
	el, err := lease.NewElector(client, lease.Options{TTL: ttl, Retry: retry, Logger: testLogger(b.t, holder+"-lease")})
	require.NoError(b.t, err)
	watch := &termWatch{inner: el, ended: make(chan error, 8)}
	opt := defaultOptions()
	opt.Logger = testLogger(b.t, holder)
	opt.Clock = clk
	opt.Pool = b0pool(b.t, b.url)
	opt.Kafka = kcfg
	opt.Elector = watch
	opt.Holder = holder
	e, err := NewEngine(opt)
	require.NoError(b.t, err)
	stop := runManager(b.t, lifecycle.NewManager(opt.Logger, e.Services()...))
	return watch, stop
}

// stamped counts what a processor whose clock reads from..until wrote:
// registered records, finished records and outbox rows.
func (b *zombieBundle) stamped(from, until time.Time) [3]int {
	b.t.Helper()
	var n [3]int
	require.NoError(b.t, b.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM proc_state WHERE registered_at BETWEEN $1 AND $2),
		(SELECT count(*) FROM proc_state WHERE finished_at BETWEEN $1 AND $2),
		(SELECT count(*) FROM outbox WHERE created_at BETWEEN $1 AND $2)`, from, until).Scan(&n[0], &n[1], &n[2]))
	return n
}

func (b *zombieBundle) holder() string {
	var h string
	err := b.pool.QueryRow(context.Background(), `SELECT holder FROM lease WHERE name=$1 AND expires_at > now()`, LeaseName).Scan(&h)
	if err != nil {
		return ""
	}
	return h
}

// TestZombie_R_H6_ProcessorFencedMidStreamStopsAndCommitsNothing: two
// processors on one database under the real lease of the control plane.
// The first is active and mid-stream — the inbox is fed continuously —
// when an operator force-releases its lease; the second takes over. The
// first learns nothing from its elector for a long time (its ttl is a
// minute, so its next renewal is 20 s away): its next fenced write is
// refused, which alone ends its term at once — every loop stops — and it
// commits nothing after the release: no record it registered, finished or
// queued carries its clock after that moment. The second processes the
// whole stream, each message once.
func TestZombie_R_H6_ProcessorFencedMidStreamStopsAndCommitsNothing(t *testing.T) {
	t.Parallel()
	b := newZombieBundle(t)
	kcfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &kcfg)
	producer, err := kgo.NewClient(append(kcfg.ClientOpts(testLogger(t, "producer"), "producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	t.Cleanup(producer.Close)

	// The stream: records kept up to ahead beyond the finished messages,
	// until stopped; the processors stay behind it, so A is mid-stream when
	// it is fenced, and what is left to process at the end stays small.
	const ahead = 300
	var produced atomic.Int64
	stopFeed := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for id := int64(1); id <= 1500; id++ {
			for id > ahead {
				var finished int64
				if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM proc_state WHERE finished_at IS NOT NULL`).Scan(&finished); err != nil {
					t.Errorf("counting finished messages: %v", err)
					return
				}
				if id <= finished+ahead {
					break
				}
				select {
				case <-stopFeed:
					return
				case <-tick.C:
				}
			}
			select {
			case <-stopFeed:
				return
			default:
			}
			raw := refMsg(id, "GLST", "ADD", glst("G"+strconv.FormatInt(id, 10), "x"))
			rec := &kgo.Record{Topic: kcfg.Topics.Inbox, Partition: 0, Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(raw)}
			if err := producer.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
				t.Errorf("producing %d: %v", id, err)
				return
			}
			produced.Store(id)
		}
	}()
	t.Cleanup(func() {
		select {
		case <-stopFeed:
		default:
			close(stopFeed)
		}
		<-fed
	})

	// A's clock stands at tA (it needs no backoff while healthy); B's runs
	// from a minute later — inside the head deadline of a message A
	// started.
	tA := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	tB := tA.Add(time.Minute)
	stampA := func() [3]int { return b.stamped(tA, tA) }
	stampB := func() [3]int { return b.stamped(tB, tB.AddDate(1, 0, 0)) }
	// A campaigns again only 30 s to a minute after its term ends fenced
	// (its retry with libs/backoff's jitter), so the
	// standby B (polling every 50 ms) is the one that takes over: otherwise
	// the freed lease goes to whichever elector asks first, and a new term
	// of A would be a legitimate writer, not the zombie under test.
	watchA, stopA := b.processor(kcfg, "zombie-a", clock.NewFake(tA), time.Minute, time.Minute)
	require.Eventually(t, func() bool { return stampA()[1] >= 50 }, 30*time.Second, 5*time.Millisecond, "A never processed")
	watchB, stopB := b.processor(kcfg, "standby-b", offsetClock{base: tB, start: time.Now()}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, "zombie-a", b.holder(), "B is standby while A holds the lease")

	// The operator takes the lease away from A while A is mid-stream.
	conn := controlv1.NewLeaseServiceClient(mustDial(t, b.addr))
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+zombieToken), 10*time.Second)
	defer cancel()
	released := time.Now()
	_, err = conn.ForceRelease(cctx, &controlv1.ForceReleaseLeaseRequest{Name: LeaseName, Operator: "ops", Reason: "zombie test"})
	require.NoError(t, err)
	atRelease := stampA()

	select {
	case err := <-watchA.ended:
		require.ErrorIs(t, err, lease.ErrFenced, "A's term ended because its fenced write was refused")
		require.Less(t, time.Since(released), 10*time.Second, "at once, not at the next renewal")
	case <-time.After(15 * time.Second):
		t.Fatal("A's term did not end after its lease was force-released (its next renewal is 20 s away)")
	}
	require.Eventually(t, func() bool { return b.holder() == "standby-b" && stampB()[1] >= 50 }, 30*time.Second, 5*time.Millisecond,
		"B did not take over")

	close(stopFeed)
	<-fed
	total := produced.Load()
	require.Eventually(t, func() bool {
		return b.count(`SELECT count(*) FROM proc_state WHERE state='SUCCEEDED'`) == int(total)
	}, 3*time.Minute, 10*time.Millisecond, "the stream was not processed to its end") // a bound on completeness, not on speed: -race beside the other packages on two cores is slow
	require.Empty(t, watchB.ended, "B's term stood")
	stopB()
	stopA()
	require.Equal(t, atRelease, stampA(), "A committed nothing after it lost its term")
	// The one message A may have been executing when it was fenced carries
	// one counted attempt (its marker could not be withdrawn); no other.
	require.LessOrEqual(t, b.count(`SELECT count(*) FROM proc_state WHERE attempts > 0`), 1)
	require.Equal(t, int(total), b.count(`SELECT count(*) FROM ref_data WHERE type='GLST'`), "every message applied once")
	require.Equal(t, int(total), b.count(`SELECT count(*) FROM outbox WHERE target='mailbox'`), "one backfill intent each")
	t.Logf("stream of %d messages; A finished %d before the release", total, atRelease[1])
}

func (b *zombieBundle) count(sql string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// mustDial connects to the control plane at addr.
func mustDial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
