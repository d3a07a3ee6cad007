package relay

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/lease/leasetest"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/services/internal/sisrequest"
)

// The zombie tests (R-H6) run two dispatcher instances on one PostgreSQL
// and one mailbox database: the old holder A and the new holder B. Each has
// its own broker, its own clock and its own processed value, so every
// record, marker and COUTMSGS row tells which instance caused it.
//
// The scenario is the same for every target. A holds the target's lease
// and has done the side effect of its first batch (produced it, written
// the marker, inserted the COUTMSGS row); the commit that records it waits
// on a row lock the test holds. Now an operator force-releases the lease
// and B takes over, does the same batch and waits on the same lock. The
// test lets both go: A's fenced commit is refused, and A's loop must end
// its term at once (A's renewal is 20 s away, so only the refusal can end
// it in time); then more work arrives, and B must do all of it while A
// causes nothing: no record, no marker, no COUTMSGS row, no repeat of its
// first batch. A's first batch, done before A could know, is the one
// documented repeat (at least once: B does it again).

// zombieTTL is long enough that no renewal of A falls inside a test: A can
// learn of the force-release only from a refused check or commit.
const zombieTTL = time.Minute

// termEnd is how one term of an instance ended.
type termEnd struct {
	token int64
	err   error
}

// recordingElector is a lease.Elector that reports each term's start and
// end to the test.
type recordingElector struct {
	e       *lease.Elector
	started chan int64
	ended   chan termEnd
}

func (r *recordingElector) Run(ctx context.Context, name, holder string, fn func(context.Context, int64) error) error {
	return r.e.Run(ctx, name, holder, func(ctx context.Context, token int64) error {
		r.started <- token
		err := fn(ctx, token)
		r.ended <- termEnd{token: token, err: err}
		return err
	})
}

// zombieEnv is the shared databases and the lease table of a zombie test.
type zombieEnv struct {
	*testBundle
	leases *leasetest.Client
}

func newZombieEnv(t *testing.T) *zombieEnv {
	t.Helper()
	b := setup(t)
	return &zombieEnv{testBundle: b, leases: leasetest.NewClient(b.pool)}
}

// instance is one dispatcher instance of a zombie test.
type instance struct {
	holder    string
	processed string
	clock     *clock.Fake
	kcfg      kafka.Config
	cluster   *kafkatest.Cluster
	r         *Relay
	elector   *recordingElector
}

// instance builds a relay with its own broker, clock (at now) and
// processed value, under a real Elector on the test's lease table.
func (z *zombieEnv) instance(t *testing.T, holder string, now time.Time, processed string) *instance {
	t.Helper()
	in := &instance{holder: holder, processed: processed, clock: clock.NewFake(now), kcfg: kafkatest.DefaultConfig()}
	in.cluster = kafkatest.NewCluster(t, &in.kcfg)
	return z.start(t, in)
}

// instanceOn builds an instance like instance does, producing to the
// broker of another instance: both share one cluster.
func (z *zombieEnv) instanceOn(t *testing.T, holder string, now time.Time, processed string, broker *instance) *instance {
	t.Helper()
	in := &instance{holder: holder, processed: processed, clock: clock.NewFake(now), kcfg: broker.kcfg, cluster: broker.cluster}
	return z.start(t, in)
}

// start gives in its elector, pool and relay.
func (z *zombieEnv) start(t *testing.T, in *instance) *instance {
	t.Helper()
	holder, processed := in.holder, in.processed
	e, err := lease.NewElector(z.leases, lease.Options{TTL: zombieTTL, Retry: 20 * time.Millisecond, Logger: z.log.With("instance", holder)})
	require.NoError(t, err)
	in.elector = &recordingElector{e: e, started: make(chan int64, 100), ended: make(chan termEnd, 100)}
	// Its own pool, as its own process would have: the old holder's
	// blocked sessions must not starve the new holder of connections.
	pool, err := pgxpool.New(context.Background(), z.pgURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opt := testOptions()
	opt.SchdFlushPeriod = 20 * time.Millisecond
	opt.Logger, opt.Clock, opt.Pool, opt.Mailbox, opt.Kafka = z.log.With("instance", holder), in.clock, pool, z.mailbox, in.kcfg
	opt.ProcessedValue, opt.Elector, opt.Holder = processed, in.elector, holder
	in.r, err = New(opt)
	require.NoError(t, err)
	return in
}

// run runs the instance's notification listener and target's loop under
// its lease until the test ends, and returns the token of its first term.
func (in *instance) run(t *testing.T, target string) int64 {
	t.Helper()
	var svcs []*lifecycle.Service
	for _, s := range in.r.Services() {
		if s.Name() == "dispatcher-listen" || s.Name() == "dispatcher-"+target+"-leader" {
			svcs = append(svcs, s)
		}
	}
	require.Len(t, svcs, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.NewManager(in.r.log, svcs...).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("instance " + in.holder + " did not stop")
		}
	})
	select {
	case token := <-in.elector.started:
		return token
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never acquired lease %s", in.holder, LeaseName(target))
		return 0
	}
}

// requireFencedAtOnce checks that term token ended with a refused fence
// within a few seconds — long before its first renewal could have told it
// the lease was gone.
func (in *instance) requireFencedAtOnce(t *testing.T, token int64) {
	t.Helper()
	select {
	case end := <-in.elector.ended:
		require.Equal(t, token, end.token)
		require.ErrorIs(t, end.err, lease.ErrFenced, "the term must end because its fenced write was refused")
	case <-time.After(10 * time.Second):
		t.Fatalf("%s kept running its term %d after its fenced write was refused (R-H6)", in.holder, token)
	}
}

// lockOutbox locks outbox rows in a transaction of the test, so that a
// relay's commit recording them waits; release commits it.
func (z *zombieEnv) lockOutbox(t *testing.T, ids ...int64) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := z.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, `SELECT id FROM outbox WHERE id = ANY($1) FOR UPDATE`, ids)
	require.NoError(t, err)
	return func() { require.NoError(t, tx.Commit(ctx)) }
}

// awaitLockWaiters waits until n sessions of the test database wait for a
// lock: n relays have done their side effect and wait to record it.
func (z *zombieEnv) awaitLockWaiters(t *testing.T, n int, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting int
		err := z.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting >= n
	}, 30*time.Second, 5*time.Millisecond, what)
}

// takeOver force-releases target's lease, as `msgxctl lease force-release`
// does, and starts b, which must acquire a newer term.
func (z *zombieEnv) takeOver(t *testing.T, target string, tokenA int64, b *instance) int64 {
	t.Helper()
	released, err := z.leases.ForceRelease(context.Background(), LeaseName(target))
	require.NoError(t, err)
	require.True(t, released)
	tokenB := b.run(t, target)
	require.Greater(t, tokenB, tokenA)
	return tokenB
}

// requireHolder checks that in still holds target's lease with token.
func (z *zombieEnv) requireHolder(t *testing.T, target string, in *instance, token int64) {
	t.Helper()
	holder, tok, err := z.leases.Holder(context.Background(), LeaseName(target))
	require.NoError(t, err)
	require.Equal(t, in.holder, holder)
	require.Equal(t, token, tok)
}

// awaitState waits until every row is in state.
func (z *zombieEnv) awaitState(t *testing.T, state string, ids ...int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := z.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE id = ANY($1) AND state = $2`, ids, state).Scan(&n)
		return err == nil && n == len(ids)
	}, 30*time.Second, 5*time.Millisecond, "outbox rows %v %s", ids, state)
}

// recordedAt returns how many outbox rows were recorded as sent at the
// given clock reading: with one clock per instance, by that instance.
func (z *zombieEnv) recordedAt(t *testing.T, at time.Time) int {
	t.Helper()
	var n int
	require.NoError(t, z.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE sent_at = $1`, at).Scan(&n))
	return n
}

// keyCounts reads every committed record of topic on the instance's
// broker and counts them by key.
func (in *instance) keyCounts(t *testing.T, topic string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, r := range readCommitted(t, in.kcfg, topic) {
		counts[string(r.Key)]++
	}
	return counts
}

// zombieKafkaTarget runs the scenario for an outbox target relayed to
// Kafka one row per record.
func zombieKafkaTarget(t *testing.T, target string, topic func(kafka.Config) string) {
	z := newZombieEnv(t)
	first := []int64{
		z.addRow(t, target, "FLID-1", state(1, 1), versionHeaders(1)),
		z.addRow(t, target, "FLID-2", state(2, 1), versionHeaders(1)),
	}
	release := z.lockOutbox(t, first...)
	a := z.instance(t, "host-a/1/old", testNow, "PROCESSED")
	b := z.instance(t, "host-b/2/new", testNow.Add(time.Hour), "PROCESSED")

	tokenA := a.run(t, target)
	z.awaitLockWaiters(t, 1, "A produced its first batch and waits to record it")
	tokenB := z.takeOver(t, target, tokenA, b)
	z.awaitLockWaiters(t, 2, "B produced the same batch and waits to record it")
	release()
	a.requireFencedAtOnce(t, tokenA)

	later := []int64{
		z.addRow(t, target, "FLID-3", state(3, 1), versionHeaders(1)),
		z.addRow(t, target, "FLID-1", state(1, 2), versionHeaders(2)),
	}
	z.awaitState(t, "SENT", append(first, later...)...)
	require.Equal(t, map[string]int{"FLID-1": 2, "FLID-2": 1, "FLID-3": 1}, b.keyCounts(t, topic(b.kcfg)), "B relays everything")
	require.Equal(t, map[string]int{"FLID-1": 1, "FLID-2": 1}, a.keyCounts(t, topic(a.kcfg)),
		"A produced its first batch once, before it could know, and nothing after its term ended")
	require.Zero(t, z.recordedAt(t, testNow), "A recorded nothing")
	require.Equal(t, 4, z.recordedAt(t, b.clock.Now()))
	z.requireHolder(t, target, b, tokenB)
}

// TestZombie_R_H6_MsgTargetStopsAtOnce: the msg target's old holder stops
// at its first refused commit and produces nothing to `msg` afterwards.
func TestZombie_R_H6_MsgTargetStopsAtOnce(t *testing.T) {
	t.Parallel()
	zombieKafkaTarget(t, TargetMsg, func(c kafka.Config) string { return c.Topics.Msg })
}

// TestZombie_R_H6_FlightStateTargetStopsAtOnce: the same for the
// flight-state target and msgx.flight-state.
func TestZombie_R_H6_FlightStateTargetStopsAtOnce(t *testing.T) {
	t.Parallel()
	zombieKafkaTarget(t, TargetFlightState, func(c kafka.Config) string { return c.Topics.FlightState })
}

// TestZombie_R_H6_SchdTargetStopsAtOnce: the schd target's old holder
// stops at its first refused flush mark and flushes nothing afterwards.
func TestZombie_R_H6_SchdTargetStopsAtOnce(t *testing.T) {
	t.Parallel()
	z := newZombieEnv(t)
	first := []int64{
		z.addRow(t, TargetSchd, "1001", state(1001, 1), versionHeaders(1)),
		z.addRow(t, TargetSchd, "1002", state(1002, 1), versionHeaders(1)),
	}
	release := z.lockOutbox(t, first...)
	a := z.instance(t, "host-a/1/old", testNow, "PROCESSED")
	b := z.instance(t, "host-b/2/new", testNow.Add(time.Hour), "PROCESSED")

	tokenA := a.run(t, TargetSchd)
	z.awaitLockWaiters(t, 1, "A flushed and waits to mark the flush")
	tokenB := z.takeOver(t, TargetSchd, tokenA, b)
	z.awaitLockWaiters(t, 2, "B flushed the same rows and waits to mark them")
	release()
	a.requireFencedAtOnce(t, tokenA)

	later := []int64{z.addRow(t, TargetSchd, "1003", state(1003, 1), versionHeaders(1))}
	z.awaitState(t, "SENT", append(first, later...)...)
	require.Equal(t, map[string]int{"1001": 1, "1002": 1, "1003": 1}, b.keyCounts(t, b.kcfg.Topics.Schd))
	require.Equal(t, map[string]int{"1001": 1, "1002": 1}, a.keyCounts(t, a.kcfg.Topics.Schd),
		"A flushed once, before it could know, and never again")
	require.Zero(t, z.recordedAt(t, testNow), "A recorded nothing")
	z.requireHolder(t, TargetSchd, b, tokenB)
}

// TestZombie_R_H6_MailboxTargetStopsAtOnce: the mailbox target's old
// holder wrote one batch of markers (one MySQL UPDATE) before it could
// know; the fenced statement recording them is refused, it stops, and it
// writes no further marker.
func TestZombie_R_H6_MailboxTargetStopsAtOnce(t *testing.T) {
	t.Parallel()
	z := newZombieEnv(t)
	m1, m2 := z.insertMailbox(t, time.Time{}, "VALID"), z.insertMailbox(t, time.Time{}, "VALID")
	first := []int64{z.addIntent(t, m1), z.addIntent(t, m2)}
	release := z.lockOutbox(t, first...)
	a := z.instance(t, "host-a/1/old", testNow, "DONE-BY-A")
	b := z.instance(t, "host-b/2/new", testNow.Add(time.Hour), "DONE-BY-B")

	tokenA := a.run(t, TargetMailbox)
	z.awaitLockWaiters(t, 1, "A wrote its first batch of markers and waits to record it")
	tokenB := z.takeOver(t, TargetMailbox, tokenA, b)
	z.awaitLockWaiters(t, 2, "B found the marker and waits to record it")
	release()
	a.requireFencedAtOnce(t, tokenA)

	m3 := z.insertMailbox(t, time.Time{}, "VALID")
	later := z.addIntent(t, m3)
	z.awaitState(t, "SENT", append(first, later)...)
	for _, id := range []int64{m1, m2} {
		_, status := z.marker(t, id)
		require.Equal(t, "DONE-BY-A", status, "mailbox row %d: A's one batch, written before it could know", id)
	}
	_, status := z.marker(t, m3)
	require.Equal(t, "DONE-BY-B", status, "A wrote no marker after its term ended")
	for _, id := range first {
		var outcome string
		require.NoError(t, z.pool.QueryRow(context.Background(), `SELECT outcome FROM outbox WHERE id=$1`, id).Scan(&outcome))
		require.Equal(t, OutcomeAlreadyMarked, outcome, "B recorded A's markers; A recorded nothing")
	}
	require.Zero(t, z.recordedAt(t, testNow))
	z.requireHolder(t, TargetMailbox, b, tokenB)
}

// TestZombie_R_H6_CoutmsgsTargetStopsAtOnce: the coutmsgs target's old
// holder inserted one request before it could know; its commit is refused,
// it stops, and it inserts no further COUTMSGS row.
func TestZombie_R_H6_CoutmsgsTargetStopsAtOnce(t *testing.T) {
	t.Parallel()
	z := newZombieEnv(t)
	req1, out1 := z.registerRequest(t, sisrequest.TypeRQFD, 1)
	req2, out2 := z.registerRequest(t, sisrequest.TypeRQRD, 2)
	release := z.lockOutbox(t, out1, out2)
	a := z.instance(t, "host-a/1/old", testNow, "PROCESSED")
	b := z.instance(t, "host-b/2/new", testNow.Add(time.Hour), "PROCESSED")

	tokenA := a.run(t, TargetCoutmsgs)
	z.awaitLockWaiters(t, 1, "A inserted the first request and waits to record it")
	tokenB := z.takeOver(t, TargetCoutmsgs, tokenA, b)
	z.awaitLockWaiters(t, 2, "B found A's insert and waits to record it")
	release()
	a.requireFencedAtOnce(t, tokenA)

	z.awaitState(t, "SENT", out1, out2)
	z.closeRequests(t)
	req3, out3 := z.registerRequest(t, sisrequest.TypeRQFD, 3)
	z.awaitState(t, "SENT", out3)
	byA := testNow.In(airport).Format(time.DateTime)
	byB := b.clock.Now().In(airport).Format(time.DateTime)
	rows := z.coutRows(t)
	require.Len(t, rows, 3, "one COUTMSGS row per request: A repeated nothing")
	inserted := map[int64]string{}
	for _, row := range rows {
		inserted[row.ID] = row.Inserted
	}
	for req, want := range map[int64]string{req1: byA, req2: byB, req3: byB} {
		r := z.request(t, req)
		require.NotNil(t, r.OutboundID, "request %d", req)
		require.Equal(t, want, inserted[*r.OutboundID], "request %d", req)
	}
	require.Equal(t, OutcomeReused, z.coutOutbox(t, out1).Outcome, "B recorded A's insert instead of inserting again")
	z.requireHolder(t, TargetCoutmsgs, b, tokenB)
}

// closeRequests closes every open request, so that a new one of the same
// scope can be registered (G-REQ-OPEN-UNIQUE).
func (b *testBundle) closeRequests(t *testing.T) {
	t.Helper()
	b.exec(t, `UPDATE req_track SET state='EXPIRED', closed_at=now(), closed_reason='test' WHERE state IN ('REGISTERED','SENT','WAITING')`)
}

// standbyElector never acquires: a relay under it holds no term, which the
// write-path tests then set by hand.
type standbyElector struct{}

func (standbyElector) Run(ctx context.Context, _, _ string, _ func(context.Context, int64) error) error {
	<-ctx.Done()
	return nil
}

// staleAndCurrent gives lease name a first term, force-releases it and
// gives it to another holder: it returns the stale and the current token.
func staleAndCurrent(t *testing.T, leases *leasetest.Client, name string) (stale, current int64) {
	t.Helper()
	ctx := context.Background()
	g, err := leases.Acquire(ctx, name, "host-a/1/old", zombieTTL)
	require.NoError(t, err)
	_, err = leases.ForceRelease(ctx, name)
	require.NoError(t, err)
	h, err := leases.Acquire(ctx, name, "host-b/2/new", zombieTTL)
	require.NoError(t, err)
	require.Greater(t, h.Token, g.Token)
	return g.Token, h.Token
}

// snapshot is every row the relay's writes can change, as text.
func (b *testBundle) snapshot(t *testing.T) string {
	t.Helper()
	var s string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT string_agg(o::text, E'\n' ORDER BY id) FROM outbox o), '') || E'\n--\n' ||
		coalesce((SELECT string_agg(p::text, E'\n' ORDER BY msg_id) FROM proc_state p), '') || E'\n--\n' ||
		coalesce((SELECT string_agg(q::text, E'\n' ORDER BY id) FROM req_track q), '')`).Scan(&s))
	return s
}

// TestFence_R_H6_EveryWritePathUnderAStaleTokenCommitsNothing executes
// each PostgreSQL write path of the relay under a stale token: each one
// is refused with ErrFenced, commits nothing, and ends the term (its
// context is cancelled, and a second call is refused without reaching the
// database). The same call under the current token does change the
// database, so each path is really a write. This replaces a textual scan
// of the source for unfenced writes; the type system does the rest: the
// relay holds no pool that could write (only reads, the listener and
// lease.Writer).
func TestFence_R_H6_EveryWritePathUnderAStaleTokenCommitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Elector = standbyElector{} })
	leases := leasetest.NewClient(b.pool)
	tokens := map[string][2]int64{}
	for _, target := range []string{TargetMsg, TargetSchd, TargetMailbox, TargetCoutmsgs} {
		stale, current := staleAndCurrent(t, leases, LeaseName(target))
		tokens[target] = [2]int64{stale, current}
	}
	now := b.clock.Now()
	cause := fmt.Errorf("broker refused: %w", kerr.UnknownServerError) // counted (class refused), so "dead" paths are dead
	type path struct {
		name, target string
		// prepare adds the rows the write changes and returns the write.
		prepare func(t *testing.T) func(ctx context.Context) error
	}
	seq := int64(0)
	next := func() int64 { seq++; return seq }
	row := func(target string) (outboxRow, int64) {
		key := "FLID-" + strconv.FormatInt(next(), 10)
		id := b.addRow(t, target, key, state(1, 1), versionHeaders(1))
		return outboxRow{ID: id, Key: key}, id
	}
	paths := []path{
		{"kafka sent", TargetMsg, func(t *testing.T) func(context.Context) error {
			_, id := row(TargetMsg)
			return func(ctx context.Context) error { return b.r.markDelivered(ctx, TargetMsg, []int64{id}, now) }
		}},
		{"kafka backoff", TargetMsg, func(t *testing.T) func(context.Context) error {
			o, _ := row(TargetMsg)
			return func(ctx context.Context) error { return b.r.fail(ctx, TargetMsg, o, cause, now) }
		}},
		{"kafka dead", TargetMsg, func(t *testing.T) func(context.Context) error {
			o, _ := row(TargetMsg)
			o.Attempts = b.r.opt.MaxAttempts
			return func(ctx context.Context) error { return b.r.fail(ctx, TargetMsg, o, cause, now) }
		}},
		{"schd flushed", TargetSchd, func(t *testing.T) func(context.Context) error {
			id := b.addRow(t, TargetSchd, "1001", state(1001, 1), versionHeaders(1))
			s := b.r.NewSchd(nil)
			return func(ctx context.Context) error {
				_, err := s.markFlushed(ctx, []int64{id}, []int64{id}, []bool{false})
				return err
			}
		}},
		{"schd backoff", TargetSchd, func(t *testing.T) func(context.Context) error {
			id := b.addRow(t, TargetSchd, "1002", state(1002, 1), versionHeaders(1))
			s := b.r.NewSchd(nil)
			return func(ctx context.Context) error { return s.backOff(ctx, []int64{id}, cause, refused) }
		}},
		{"marker sent", TargetMailbox, func(t *testing.T) func(context.Context) error {
			m := b.insertMailbox(t, time.Time{}, "VALID")
			id := b.addIntent(t, m)
			return func(ctx context.Context) error { return b.r.markSent(ctx, id, m, OutcomeWritten, now) }
		}},
		{"marker abandoned", TargetMailbox, func(t *testing.T) func(context.Context) error {
			id := b.addIntent(t, 990000+next())
			return func(ctx context.Context) error { return b.r.markAbandoned(ctx, id, now) }
		}},
		{"marker backoff", TargetMailbox, func(t *testing.T) func(context.Context) error {
			m := b.insertMailbox(t, time.Time{}, "VALID")
			id := b.addIntent(t, m)
			return func(ctx context.Context) error { return b.r.markFailed(ctx, id, m, 1, now, cause, now) }
		}},
		{"marker gave up", TargetMailbox, func(t *testing.T) func(context.Context) error {
			m := b.insertMailbox(t, time.Time{}, "VALID")
			id := b.addIntent(t, m)
			return func(ctx context.Context) error {
				return b.r.markFailed(ctx, id, m, b.r.opt.BackfillMaxAttempts, now, cause, now)
			}
		}},
		{"request sent", TargetCoutmsgs, func(t *testing.T) func(context.Context) error {
			b.closeRequests(t)
			req, id := b.registerRequest(t, sisrequest.TypeRQRD, next())
			return func(ctx context.Context) error { return b.r.recordRequestSent(ctx, id, req, 77, OutcomeWritten) }
		}},
		{"request settled", TargetCoutmsgs, func(t *testing.T) func(context.Context) error {
			b.closeRequests(t)
			req, id := b.registerRequest(t, sisrequest.TypeRQRD, next())
			return func(ctx context.Context) error {
				return b.r.coutmsgsSettled(ctx, id, "ABANDONED", OutcomeRequestClosed, req)
			}
		}},
		{"request backoff", TargetCoutmsgs, func(t *testing.T) func(context.Context) error {
			b.closeRequests(t)
			req, id := b.registerRequest(t, sisrequest.TypeRQRD, next())
			c := coutmsgsRow{id: id, pkey: strconv.FormatInt(req, 10)}
			return func(ctx context.Context) error { return b.r.coutmsgsFailed(ctx, c, cause) }
		}},
		{"request dead", TargetCoutmsgs, func(t *testing.T) func(context.Context) error {
			b.closeRequests(t)
			req, id := b.registerRequest(t, sisrequest.TypeRQRD, next())
			c := coutmsgsRow{id: id, pkey: strconv.FormatInt(req, 10), attempts: b.r.opt.MaxAttempts}
			return func(ctx context.Context) error { return b.r.coutmsgsFailed(ctx, c, cause) }
		}},
	}
	// Sequential: the paths share the bundle's databases and its terms.
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			write := p.prepare(t)
			tok := tokens[p.target]

			terms := b.r.terms[p.target]
			tctx, end := terms.Start(context.Background(), tok[0])
			term := terms.Term()
			before := b.snapshot(t)
			err := write(tctx)
			require.ErrorIs(t, err, lease.ErrFenced)
			require.Equal(t, before, b.snapshot(t), "a write under a stale token committed something")
			require.ErrorIs(t, context.Cause(tctx), lease.ErrFenced, "the refusal ends the term")
			require.ErrorIs(t, write(context.Background()), lease.ErrFenced, "an ended term stays refused")
			require.ErrorIs(t, term.Check(context.Background()), lease.ErrFenced)

			end()
			_, endCurrent := terms.Start(context.Background(), tok[1])
			require.NoError(t, write(context.Background()))
			require.NotEqual(t, before, b.snapshot(t), "the path must write under the current token")
			endCurrent()
		})
	}
}

// TestFence_R_H6_DrainsUnderAStaleTokenCauseNoSideEffect: with work
// pending and a stale token, no drain produces a record, writes a marker
// or inserts a COUTMSGS row: the check before the side effect refuses
// first, and the term ends.
func TestFence_R_H6_DrainsUnderAStaleTokenCauseNoSideEffect(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Elector = standbyElector{} })
	leases := leasetest.NewClient(b.pool)
	m := b.insertMailbox(t, time.Time{}, "VALID")
	b.addIntent(t, m)
	b.registerRequest(t, sisrequest.TypeRQRD, 1)
	b.addRow(t, TargetMsg, "FLID-1", state(1, 1), versionHeaders(1))
	b.addRow(t, TargetSchd, "1001", state(1001, 1), versionHeaders(1))
	msgCl := b.producer(t, b.kcfg.Topics.Msg)
	schdCl := b.producer(t, b.kcfg.Topics.Schd)
	drains := map[string]func(context.Context) error{
		TargetMsg: func(ctx context.Context) error { _, err := b.r.drainKafka(ctx, msgCl, TargetMsg); return err },
		TargetSchd: func(ctx context.Context) error {
			_, err := b.r.NewSchd(schdCl).FlushOnce(ctx)
			return err
		},
		TargetMailbox:  func(ctx context.Context) error { _, err := b.r.DrainMailbox(ctx); return err },
		TargetCoutmsgs: func(ctx context.Context) error { _, err := b.r.DrainCoutmsgs(ctx); return err },
	}
	before := b.snapshot(t)
	for target, drain := range drains {
		stale, _ := staleAndCurrent(t, leases, LeaseName(target))
		tctx, end := b.r.terms[target].Start(context.Background(), stale)
		require.ErrorIs(t, drain(tctx), lease.ErrFenced, target)
		require.ErrorIs(t, context.Cause(tctx), lease.ErrFenced, target)
		end()
	}
	require.Equal(t, before, b.snapshot(t))
	processed, _ := b.marker(t, m)
	require.False(t, processed.Valid, "no marker")
	require.Empty(t, b.coutRows(t), "no COUTMSGS row")
	for _, topic := range []string{b.kcfg.Topics.Msg, b.kcfg.Topics.Schd} {
		in := &instance{holder: "the relay", kcfg: b.kcfg}
		require.Empty(t, in.keyCounts(t, topic), "no record on %s", topic)
	}
}
