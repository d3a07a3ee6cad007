package pipeline

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/backoff"
	"msgexchange/libs/config"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/private"
	"msgexchange/migrations"
	"msgexchange/services/control"
)

// outageHeadDeadline is the head deadline of the outage tests' processors:
// each outage lasts longer.
const outageHeadDeadline = 3 * time.Second

// outageBundle is a private PostgreSQL with the control plane on it, a
// broker, and processors under the control plane's real lease, each
// allowed to acquire it only in its turn, so that a test decides which
// instance takes over after an outage.
type outageBundle struct {
	t           *testing.T
	pg          *private.Postgres
	url         string
	pool        *pgxpool.Pool
	addr        string
	stopControl func()
	kcfg        kafka.Config
	producer    *kgo.Client
	turn        atomic.Value // string: the holder that may acquire the lease
	clk         skipClock
}

// skipClock runs at the real pace, and a test moves it on by an outage's
// length without waiting for it: the processors' head deadline passes in
// an outage that lasts only as long as a term needs to end.
type skipClock struct{ skipped atomic.Int64 }

func (c *skipClock) Now() time.Time       { return time.Now().Add(time.Duration(c.skipped.Load())) }
func (c *skipClock) skip(d time.Duration) { c.skipped.Add(int64(d)) }

func newOutageBundle(t *testing.T) *outageBundle {
	t.Helper()
	b := &outageBundle{t: t, pg: private.NewPostgres(t)}
	b.url = b.pg.CreateDatabase("msgx")
	require.NoError(t, migrations.Up(context.Background(), b.url))
	b.pool = b0pool(t, b.url)
	b.startControl("127.0.0.1:0")
	b.kcfg = kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &b.kcfg)
	var err error
	b.producer, err = kgo.NewClient(append(b.kcfg.ClientOpts(testLogger(t, "producer"), "producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	t.Cleanup(b.producer.Close)
	b.turn.Store("")
	return b
}

// startControl runs the control plane on addr.
func (b *outageBundle) startControl(addr string) {
	b.t.Helper()
	var cfg control.Config
	fs := flag.NewFlagSet("control", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags("control.", fs)
	cfg.GRPCAddr = addr
	cfg.AuthToken = config.Secret(zombieToken)
	cfg.ShutdownTimeout = 5 * time.Second
	svc, err := control.New(cfg, control.Deps{Logger: testLogger(b.t, "control"), Postgres: b0pool(b.t, b.url)})
	require.NoError(b.t, err)
	b.stopControl = runManager(b.t, lifecycle.NewManager(testLogger(b.t, "control"), svc.Services()...))
	b.addr = svc.GRPCAddr()
}

// turnClient lets its holder acquire the lease only in its turn.
type turnClient struct {
	lease.Client
	holder string
	turn   *atomic.Value
}

func (c turnClient) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Grant, error) {
	if c.turn.Load().(string) != c.holder {
		return lease.Grant{}, fmt.Errorf("acquiring lease %s: not the turn of %s: %w", name, c.holder, lease.ErrHeld)
	}
	return c.Client.Acquire(ctx, name, holder, ttl)
}

// processor starts a processor under the lease as holder, with the
// bundle's clock, outageHeadDeadline and retries that wait 20 ms.
func (b *outageBundle) processor(holder string) *Engine {
	b.t.Helper()
	client, err := lease.Dial(b.addr, zombieToken)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = client.Close() })
	el, err := lease.NewElector(turnClient{Client: client, holder: holder, turn: &b.turn},
		lease.Options{TTL: 2 * time.Second, Retry: 100 * time.Millisecond, Logger: testLogger(b.t, holder+"-lease")})
	require.NoError(b.t, err)
	opt := defaultOptions()
	opt.Logger = testLogger(b.t, holder)
	opt.Clock = &b.clk
	opt.Pool = b0pool(b.t, b.url)
	opt.Kafka = b.kcfg
	opt.Elector = el
	opt.Holder = holder
	opt.HeadDeadline = outageHeadDeadline
	opt.Retry = backoff.Schedule{First: 20 * time.Millisecond, Max: 20 * time.Millisecond}
	e, err := NewEngine(opt)
	require.NoError(b.t, err)
	runManager(b.t, lifecycle.NewManager(opt.Logger, e.Services()...))
	return e
}

// send produces a GLST ADD of gate as mailbox message id to the inbox.
func (b *outageBundle) send(id int64, gate string) {
	b.t.Helper()
	rec := &kgo.Record{Topic: b.kcfg.Topics.Inbox, Partition: 0, Key: []byte(strconv.FormatInt(id, 10)),
		Value: []byte(refMsg(id, "GLST", "ADD", glst(gate, "x")))}
	require.NoError(b.t, b.producer.ProduceSync(context.Background(), rec).FirstErr())
}

// lockRefData holds a SHARE lock on ref_data on a connection of its own
// until release is called or PostgreSQL goes away: an execution of a GLST
// message stays in flight, inside its handler and past its marker.
func (b *outageBundle) lockRefData() (release func()) {
	b.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.url)
	require.NoError(b.t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(b.t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE ref_data IN SHARE MODE`)
	require.NoError(b.t, err)
	return func() { _ = conn.Close(ctx) } // ends the transaction; PostgreSQL may be gone already
}

// head reads message id's state, attempts, reason and marker.
func (b *outageBundle) head(id int64) (state string, attempts int, reason, marker string) {
	b.t.Helper()
	err := b.pool.QueryRow(context.Background(), `SELECT state, attempts, COALESCE(reason, ''), COALESCE(executing_by, '')
		FROM proc_state WHERE msg_id = $1`, id).Scan(&state, &attempts, &reason, &marker)
	if err != nil {
		return "", 0, "", ""
	}
	return state, attempts, reason, marker
}

// waitExecuting waits until e executes message id, held inside its handler
// by a lock on ref_data: its marker is on the message.
func (b *outageBundle) waitExecuting(e *Engine, id int64) {
	b.t.Helper()
	require.Eventually(b.t, func() bool {
		var waiting int
		_ = b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		_, _, _, marker := b.head(id)
		return waiting > 0 && marker == e.instance
	}, 30*time.Second, 10*time.Millisecond, "%s never executed message %d", e.instance, id)
}

// awaitTermEnd waits until e's term is over: its loops stopped and its
// writes refused.
func awaitTermEnd(t *testing.T, e *Engine) {
	t.Helper()
	require.Eventually(t, func() bool { return e.db.Term() == nil }, 30*time.Second, 10*time.Millisecond,
		"the term of %s did not end", e.instance)
}

// TestHandover_R_L2_PostgresOutagesWithFiveHandoversEndApplied: two
// processors under the control plane's lease on a private PostgreSQL. The
// head (a GLST ADD) is executing — held inside its handler by a lock, past
// its marker — when PostgreSQL stops; each stop lasts longer than
// head-deadline (on the processors' clock), the holder's term ends in it (the control plane cannot
// renew), and after the restart the other processor takes the lease: five
// handovers, each with the previous holder's marker on the head. The
// marker is an outage's, not a process's end: the live instance withdraws
// it when PostgreSQL answers again, so the head is applied with no attempt
// spent — not DEAD(EXHAUSTED) "ended its process" after max-attempts (5)
// handovers.
func TestHandover_R_L2_PostgresOutagesWithFiveHandoversEndApplied(t *testing.T) {
	t.Parallel()
	b := newOutageBundle(t)
	names := []string{"processor-a", "processor-b"}
	engines := []*Engine{b.processor(names[0]), b.processor(names[1])}
	b.send(1, "G1")
	b.send(2, "G2")

	const handovers = 5
	for round := 0; round < handovers; round++ {
		x := round % 2
		release := b.lockRefData()
		b.turn.Store(names[x])
		b.waitExecuting(engines[x], 1)
		require.NoError(t, b.pg.Stop())
		stopped := time.Now()
		release()
		awaitTermEnd(t, engines[x])
		// Down longer than head-deadline on the processors' clock; then
		// the other instance's turn — given only once the next round
		// holds its lock: a turn given with the restart let the next
		// holder apply the head before the round could hold it.
		b.clk.skip(outageHeadDeadline + time.Second)
		b.turn.Store("")
		require.NoError(t, b.pg.Start())
		t.Logf("outage %d: PostgreSQL down %.1f s (and %v on the processors' clock), lease to go from %s to %s",
			round+1, time.Since(stopped).Seconds(), outageHeadDeadline+time.Second, names[x], names[1-x])
	}
	b.turn.Store(names[handovers%2])

	require.Eventually(t, func() bool {
		state, _, _, _ := b.head(2)
		return state == StateSucceeded
	}, 60*time.Second, 20*time.Millisecond, "the stream did not go on")
	state, attempts, reason, _ := b.head(1)
	require.Equal(t, StateSucceeded, state, "the head is applied, not poisoned by outages: %s", reason)
	require.Zero(t, attempts, "no outage or handover is an attempt of the message")
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM ref_data WHERE type = 'GLST' AND key = 'G1'`).Scan(&n))
	require.Equal(t, 1, n, "the head's change is applied once")
}

// TestHandover_R_L2_ControlPlaneOutageEndsApplied: the control plane is
// down, longer than head-deadline (on the processors' clock), while the
// active processor executes the head — held inside its handler by a lock,
// past its marker. The holder cannot renew, so its term ends; when the
// control plane is back the other processor takes the lease. The head's
// deadline counts only time in which it could run, and the handover is
// not an attempt: the head is applied with no attempt spent, not
// DEAD(EXHAUSTED) "head for longer than …" or charged as a crash.
func TestHandover_R_L2_ControlPlaneOutageEndsApplied(t *testing.T) {
	t.Parallel()
	b := newOutageBundle(t)
	a := b.processor("processor-a")
	bb := b.processor("processor-b")
	b.send(1, "G1")
	b.send(2, "G2")

	release := b.lockRefData()
	b.turn.Store("processor-a")
	b.waitExecuting(a, 1)
	addr := b.addr
	b.stopControl()
	awaitTermEnd(t, a)
	b.clk.skip(outageHeadDeadline + time.Second)
	release()
	b.turn.Store("processor-b")
	b.startControl(addr)

	require.Eventually(t, func() bool {
		state, _, _, _ := b.head(2)
		return state == StateSucceeded
	}, 60*time.Second, 20*time.Millisecond, "the stream did not go on")
	state, attempts, reason, _ := b.head(1)
	require.Equal(t, StateSucceeded, state, "the head is applied: %s", reason)
	require.Zero(t, attempts, "the outage and the handover are no attempt of the message")
	require.NotNil(t, bb.db.Term(), "processor-b took over")
}

// TestExecutor_R_H1_R_L2_LiveInstanceWithdrawsItsMarkerWithinTheGrace: an
// instance whose term ended in an outage leaves its marker on the head.
// The next holder does not count it at once: it waits up to MarkerGrace
// for the instance to withdraw it, the live instance does
// (withdrawMarkers), and the head then runs with no attempt spent. A
// marker nobody withdraws is counted after the grace
// (TestExecutor_R_H1_CrashAtHeadCountsAsAttempt).
func TestExecutor_R_H1_R_L2_LiveInstanceWithdrawsItsMarkerWithinTheGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "a")))
	require.NoError(t, h.e.markHead(ctx, 1)) // its execution is then cut off by the outage
	next := h.sibling()

	progressed, wait, err := next.Step(ctx)
	require.NoError(t, err)
	require.False(t, progressed, "the marker's instance gets its grace")
	require.Positive(t, wait)
	require.LessOrEqual(t, wait, markerPoll, "the next holder looks again soon")
	h.clk.Advance(DefaultMarkerGrace - time.Second)
	progressed, _, err = next.Step(ctx)
	require.NoError(t, err)
	require.False(t, progressed, "still within the grace")
	require.Zero(t, h.proc(1).Attempts)
	require.Equal(t, h.e.instance, h.markerOf(1))

	h.e.withdrawMarkers(ctx) // the live instance, PostgreSQL answering again
	require.Empty(t, h.markerOf(1))
	progressed, _, err = next.Step(ctx)
	require.NoError(t, err)
	require.True(t, progressed)
	r := h.proc(1)
	require.Equal(t, StateSucceeded, r.State, r.Reason)
	require.Zero(t, r.Attempts, "an execution cut off by an outage is no attempt")
}
