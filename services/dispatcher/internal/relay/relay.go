// Package relay implements the dispatcher's outbox loops.
package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
	"msgexchange/services/internal/outbox"
)

// Outbox targets (services/internal/outbox).
const (
	TargetFlightState = outbox.FlightState
	TargetMsg         = outbox.Msg
	TargetSchd        = outbox.Schd
	TargetMailbox     = outbox.Mailbox
	// TargetProjectionControl carries the control plane's projection
	// rebuild manifests (R-E4).
	TargetProjectionControl = outbox.ProjectionControl
)

// targets are every target the relay delivers, each under its own lease.
var targets = []string{TargetFlightState, TargetMsg, TargetSchd, TargetProjectionControl, TargetMailbox, TargetCoutmsgs}

// kafkaTargets are the targets whose rows go to Kafka.
var kafkaTargets = []string{TargetFlightState, TargetMsg, TargetSchd, TargetProjectionControl}

// Options configure a Relay.
type Options struct {
	Logger              *slog.Logger
	Clock               clock.Clock
	Meter               metric.Meter
	Pool                *pgxpool.Pool
	Mailbox             *sql.DB
	Kafka               kafka.Config
	Batch               int
	MaxAttempts         int
	BackoffMin          time.Duration
	BackoffMax          time.Duration
	ProcessedValue      string
	BackfillMaxAttempts int
	BackfillBackoffMin  time.Duration
	BackfillBackoffMax  time.Duration
	// BackfillOutageRetryMax caps the wait between marker and COUTMSGS
	// tries while the mailbox is unreachable (R-L2) or refuses the
	// dispatcher's account or a table (R-L8): markers resume at most this
	// long after it returns or grants again. Zero means BackfillBackoffMax.
	BackfillOutageRetryMax time.Duration
	// OverdueBackfill is R (R-D4, INV-7): a marker that fails more than
	// this long after its message finished (the intent's created_at, our
	// own clock) stops automatic retries at once. Zero disables the bound.
	OverdueBackfill time.Duration
	// Shadow runs beside the predecessor (R-L6): the mailbox and coutmsgs
	// loops settle their rows as shadowed without a MySQL write, so no
	// marker or COUTMSGS row is ever written and nothing piles up.
	Shadow bool
	// Elector, when set, makes each target single-active under its own
	// lease and fences the target's writes (R-B8); nil only in tests.
	Elector Elector
	// Holder names this instance in the leases; empty means lease.Holder().
	Holder string
	// SchdFlushPeriod is the interval of the schd flushes (R-D1).
	SchdFlushPeriod time.Duration
	// SchdFlushLimit is the most records one schd flush produces.
	SchdFlushLimit int
	// ProduceTimeout bounds one produce of a batch: a broker that does not
	// acknowledge it in time fails the try as transient (R-L2), and the
	// batch is tried again on the target's outage schedule. Zero means 60s.
	ProduceTimeout time.Duration
	// StallLimit is how long a target's loop may stay stalled — refused by
	// the broker, the mailbox or PostgreSQL in a way no wait cures — before
	// its service ends, so that the supervisor restarts the process (R-L8);
	// 0 means DefaultStallLimit.
	StallLimit time.Duration
	// Rand is the randomness of the retry jitter (libs/backoff); nil is
	// math/rand. Tests inject a fixed source.
	Rand func() float64
}

// Relay owns the loops. It keeps no handle on PostgreSQL that can write:
// reads go through reads, the notification listener through listenConn,
// and every write through the current term of the target's lease.Terms
// (see fence.go, R-H6).
type Relay struct {
	opt        Options // Pool is nil: split into the three below
	log        *slog.Logger
	reads      reader
	listenConn func(context.Context) (*pgxpool.Conn, error)
	mu         sync.Mutex
	wakers     []chan struct{}
	terms      map[string]*lease.Terms // each target's writes, fixed at New
	floors     floors
	outages    outages
	watches    watches
	// progress tracks each target's loop (R-L8): stalled while its
	// target, the mailbox or PostgreSQL refuses it, which makes the
	// dispatcher not ready.
	progress map[string]*progress.Tracker
	// listenProgress tracks the notification listener (ListenLoop):
	// stalled while PostgreSQL refuses its connection (R-L8).
	listenProgress *progress.Tracker
	// recordable holds, per target, whether PostgreSQL has taken the
	// loop's statement that records its deliveries since the loop started
	// or PostgreSQL last refused it (proveRecordable, R-L8).
	recordable map[string]*atomic.Bool

	// tails holds, per Kafka target, what the broker acknowledged
	// (losswatch.go).
	tails map[string]*sentTail

	holderOnce sync.Once
	holderName string
	sent       metric.Int64Counter
	failed     metric.Int64Counter
	dead       metric.Int64Counter
	markers    metric.Int64Counter
	shadowed   metric.Int64Counter
	stages     metric.Float64Histogram
	// lostRecords counts the losses of acknowledged records a Kafka
	// target found, by target (losswatch.go).
	lostRecords metric.Int64Counter
}

// New builds a Relay.
func New(opt Options) (*Relay, error) {
	m := opt.Meter
	if m == nil {
		m = noop.NewMeterProvider().Meter("dispatcher")
	}
	if opt.Pool == nil {
		return nil, errors.New("creating relay: Options.Pool is required")
	}
	r := &Relay{log: opt.Logger, reads: opt.Pool, listenConn: opt.Pool.Acquire, terms: make(map[string]*lease.Terms, len(targets))}
	for _, t := range targets {
		if opt.Elector == nil {
			r.terms[t] = lease.NewUnfencedTerms(opt.Pool, nil)
		} else {
			r.terms[t] = lease.NewTerms(opt.Pool, LeaseName(t), nil)
		}
	}
	opt.Pool = nil
	if opt.ProduceTimeout <= 0 {
		opt.ProduceTimeout = 60 * time.Second
	}
	if opt.StallLimit <= 0 {
		opt.StallLimit = DefaultStallLimit
	}
	r.progress = newProgress(opt.Clock)
	r.recordable = make(map[string]*atomic.Bool, len(targets))
	for _, t := range targets {
		r.recordable[t] = new(atomic.Bool)
	}
	r.listenProgress = progress.New(ListenLoop, opt.Clock)
	r.tails = make(map[string]*sentTail, len(kafkaTargets))
	for _, t := range kafkaTargets {
		r.tails[t] = &sentTail{}
	}
	if opt.BackfillOutageRetryMax <= 0 {
		opt.BackfillOutageRetryMax = opt.BackfillBackoffMax
	}
	r.opt = opt
	var err error
	if r.sent, err = m.Int64Counter("msgx_dispatcher_sent_total", metric.WithDescription("outbox rows delivered, by target")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if r.failed, err = m.Int64Counter("msgx_dispatcher_failed_total", metric.WithDescription("failed deliveries, by target")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if r.dead, err = m.Int64Counter("msgx_dispatcher_dead_total", metric.WithDescription("outbox rows moved to DEAD, by target")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if r.markers, err = m.Int64Counter("msgx_dispatcher_backfill_total", metric.WithDescription("mailbox marker outcomes, by outcome")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if r.shadowed, err = m.Int64Counter("msgx_dispatcher_shadowed_total",
		metric.WithDescription("mailbox markers and outbound requests settled without being written because of shadow mode, by target")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if r.lostRecords, err = m.Int64Counter("msgx_dispatcher_broker_lost_records_total",
		metric.WithDescription("times a Kafka target found the broker's end offset of a partition at or below an offset the broker had acknowledged to it, by target: records lost (an unclean leader election, a restored broker) whose outbox rows stay SENT until an operator re-sends them")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if err := r.initMetrics(m); err != nil {
		return nil, err
	}
	if err := r.initOutageMetrics(m); err != nil {
		return nil, err
	}
	if err := progress.RegisterMetrics(m, r.trackers()...); err != nil {
		return nil, err
	}
	return r, nil
}

func targetAttr(t string) metric.AddOption {
	return metric.WithAttributes(attribute.String("target", t))
}

// Services returns the listener and the per-target loops.
func (r *Relay) Services() []*lifecycle.Service {
	one := r.single
	svcs := []*lifecycle.Service{
		r.listenService(),
		one(TargetFlightState, func() *lifecycle.Service { return r.kafkaService(TargetFlightState, r.opt.Kafka.Topics.FlightState) }),
		one(TargetMsg, func() *lifecycle.Service { return r.kafkaService(TargetMsg, r.opt.Kafka.Topics.Msg) }),
		one(TargetSchd, r.schdService),
		one(TargetProjectionControl, func() *lifecycle.Service {
			return r.kafkaService(TargetProjectionControl, r.opt.Kafka.Topics.ProjectionControl)
		}),
		one(TargetMailbox, r.mailboxService),
		one(TargetCoutmsgs, r.coutmsgsService), // outbound requests (R-D5)
	}
	if r.opt.Shadow {
		// The two loops run and settle their rows unwritten (R-L6), so
		// nothing piles up: see shadowOutcomes and shadowRequest.
		r.log.Warn("shadow mode: mailbox markers and outbound requests (COUTMSGS) are settled as shadowed, never written")
	}
	return svcs
}

// newWaker registers a loop's wake-up channel; the returned func
// unregisters it when the loop ends (each lease term starts a new loop).
func (r *Relay) newWaker() (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.wakers = append(r.wakers, ch)
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.wakers = slices.DeleteFunc(r.wakers, func(c chan struct{}) bool { return c == ch })
	}
}

func (r *Relay) wakeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.wakers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// listenService LISTENs on msgx_outbox and wakes every loop on each
// notification. After a lost connection it reconnects and wakes the loops
// once, since notifications may have been missed meanwhile; reconnections
// back off from 100 ms to 5 s on libs/backoff's schedule with jitter,
// afresh after each connection that got as far as LISTEN. Each try
// reports to the listener's progress (listened): a connection PostgreSQL
// refuses stalls it, and a stall past the stall limit ends the service
// with the stall, so that the supervisor restarts the process (R-L8).
func (r *Relay) listenService() *lifecycle.Service {
	return lifecycle.NewService(ListenLoop, nil, func(ctx context.Context) error {
		retry := backoff.Schedule{First: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: backoff.DefaultJitter, Rand: r.opt.Rand}.Start()
		for ctx.Err() == nil {
			listening, err := r.listen(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if serr := r.listened(listening, err); serr != nil {
				return serr // stalled past the limit: the process ends (R-L8)
			}
			if listening {
				retry.Reset()
			}
			wait := retry.Next()
			r.log.Warn("listening for outbox notifications; reconnecting", "err", err, "retry_in", wait)
			r.wakeAll()
			if backoff.Sleep(ctx, wait) != nil {
				return nil
			}
		}
		return nil
	}, nil)
}

// listen holds one listening connection until it fails or ctx ends.
// listening reports whether LISTEN succeeded on it: PostgreSQL admitted
// the listener, whatever ended the connection later.
func (r *Relay) listen(ctx context.Context) (listening bool, err error) {
	conn, err := r.listenConn(ctx)
	if err != nil {
		return false, fmt.Errorf("acquiring listen connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN msgx_outbox"); err != nil {
		return false, fmt.Errorf("listening: %w", err)
	}
	r.listenProgress.Progressed()
	defer func() {
		// The connection goes back to the pool: stop listening on it.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = conn.Exec(uctx, "UNLISTEN *")
	}()
	// From here on every committed insert is announced: the floors may be
	// trusted, after one scan from the start that finds what was committed
	// while nobody listened.
	r.floors.listening(true)
	defer r.floors.listening(false)
	r.wakeAll()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("waiting for notification: %w", err)
		}
		if below, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			r.floors.lower(below)
		}
		r.wakeAll()
	}
}

// loop runs drain until ctx ends, waiting between drains for a wake-up, the
// next due row, or a safety interval. Each drain reports to the target's
// progress (drained); a loop stalled past the stall limit returns the stall,
// which ends its service and the process (R-L8). A stalled loop waits at
// least its stall schedule (stallRetry) before it drains again unless
// woken: rows PostgreSQL refuses to record stay due, and would otherwise
// be drained again every few milliseconds.
func (r *Relay) loop(ctx context.Context, target string, drain func(context.Context) (bool, error)) error {
	wake, done := r.newWaker()
	defer done()
	r.floors.lowerTarget(target, 0) // a new term scans from the start once
	r.recordable[target].Store(false)
	stalled := r.stallRetry()
	for ctx.Err() == nil {
		more, err := drain(ctx)
		r.watch(ctx, target)
		if ctx.Err() != nil {
			// Shutting down, or the term ended: a refused check or fenced
			// commit cancelled ctx (lease.Term), and the Elector reports it.
			return nil
		}
		if errors.Is(err, lease.ErrFenced) {
			return err // refused without a term to end: never drain again
		}
		if errors.Is(err, errProducerRestart) {
			return err // only a new term, with a new producer, goes on
		}
		if err != nil {
			r.log.Warn("relaying outbox", "target", target, "err", err)
		}
		if serr := r.drained(target, err); serr != nil {
			return serr // stalled past the limit: the process ends (R-L8)
		}
		if more && err == nil {
			continue
		}
		wait := r.nextDue(ctx, target)
		if stalls(err) {
			wait = max(wait, stalled.Next())
		} else {
			stalled.Reset()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// stallRetry is the schedule of a stalled loop's tries: 1 s doubling to
// 5 s, the loops' safety interval, with jitter. A refusal that waiting
// does not cure is tried again all the same, so that the loop progresses
// within seconds of an operator's fix (R-L8).
func (r *Relay) stallRetry() *backoff.Backoff {
	return backoff.Schedule{First: time.Second, Max: 5 * time.Second, Jitter: backoff.DefaultJitter, Rand: r.opt.Rand}.Start()
}

// proveRecordable runs the statement that records target's deliveries,
// sql with args naming no row, unless PostgreSQL has taken it since the
// loop started or last refused it: called before a produce, it keeps a
// loop whose deliveries PostgreSQL refuses to record (a revoked UPDATE on
// the outbox) from producing the same batch again on every try. What went
// out before the refusal was known goes out once more after it ends (at
// least once, the same records); a loop that starts while PostgreSQL
// refuses produces nothing (R-L8).
func (r *Relay) proveRecordable(ctx context.Context, target, sql string, args ...any) error {
	if r.recordable[target].Load() {
		return nil
	}
	if _, err := r.db(target).Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("proving PostgreSQL records the deliveries of %s: %w", target, err)
	}
	r.recordable[target].Store(true)
	return nil
}

// nextDueQuery reads the earliest due time of a target's pending rows from
// the two lanes' indexes: the retry lane's earliest (outbox_retry_idx) and
// the first fresh row above the floor (outbox_fresh_idx), neither of which
// walks the delivered history.
const nextDueQuery = `
SELECT LEAST(
	(SELECT min(next_attempt_at) FROM outbox WHERE target=$1 AND state='PENDING' AND retry),
	(SELECT next_attempt_at FROM outbox WHERE target=$1 AND state='PENDING' AND NOT retry AND id > $2 ORDER BY id LIMIT 1))`

// nextDue returns how long until the target's earliest PENDING row is due,
// bounded to [10ms, 5s] (the upper bound is a safety net for missed
// notifications, not the latency path).
func (r *Relay) nextDue(ctx context.Context, target string) time.Duration {
	var next *time.Time
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := r.reads.QueryRow(qctx, nextDueQuery, target, r.floors.peek(target)).Scan(&next)
	if err != nil || next == nil {
		return 5 * time.Second
	}
	d := next.Sub(r.opt.Clock.Now())
	return max(10*time.Millisecond, min(d, 5*time.Second))
}

// delay is the wait after a row's attempt-th failure: libs/backoff's
// capped exponential schedule from lo to hi with its default jitter, so the
// rows of many instances retrying one dependency do not come back at once.
func (r *Relay) delay(attempt int, lo, hi time.Duration) time.Duration {
	return backoff.Schedule{First: lo, Max: hi, Jitter: backoff.DefaultJitter, Rand: r.opt.Rand}.Delay(attempt)
}
