package recovery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/projector/internal/store"
)

// ServiceName is the lifecycle name of the watchdog loop.
const ServiceName = "projector-recovery"

// progressEvery is the interval of the rebuild's progress log.
const progressEvery = 10 * time.Second

// Store is what the watchdog needs of the projection; store.Store
// implements it.
type Store interface {
	Status(ctx context.Context) (store.Status, error)
	Apply(ctx context.Context, updates []store.Update) ([]store.Outcome, error)
	AcquireRebuildLock(ctx context.Context, token string, ttl time.Duration) (bool, error)
	RenewRebuildLock(ctx context.Context, token string, ttl time.Duration) (bool, error)
	ReleaseRebuildLock(ctx context.Context, token string) error
	BeginRebuild(ctx context.Context, token string) (store.BeginOutcome, error)
	FinishRebuild(ctx context.Context, token, marker string) (store.FinishOutcome, error)
}

// Source reads PostgreSQL's flights page by page; pgsource.Source
// implements it.
type Source interface {
	Page(ctx context.Context, after int64, limit int) ([]store.Update, error)
}

// Options tune the watchdog.
type Options struct {
	// Interval is the period of the completeness check.
	Interval time.Duration
	// PageSize is the number of flights read from PostgreSQL and written
	// to Redis in one pipelined round trip.
	PageSize int
	// LockTTL is the time to live of the rebuild lock; the holder renews it
	// every third of it.
	LockTTL time.Duration
	// RedisTimeout bounds one Redis call.
	RedisTimeout time.Duration
	// BackoffMax caps the wait (100ms doubling) before a failed rebuild is
	// tried again.
	BackoffMax time.Duration
	// Instance names this projector in the marker and the lock token.
	Instance string
	// OnChanged, when set, is called after a rebuild finished (the flight
	// board refreshes). It must not block.
	OnChanged func()
}

// Outcome is how one rebuild attempt of this instance ended.
type Outcome string

// Outcomes of a rebuild attempt, the outcome attribute of
// msgx_projector_recoveries_total.
const (
	// Completed: every flight was written and the marker set.
	Completed Outcome = "complete"
	// AlreadyComplete: another instance finished a rebuild just before.
	AlreadyComplete Outcome = "already_complete"
	// Interrupted: Redis lost data again, or the lock, during the rebuild;
	// it starts over.
	Interrupted Outcome = "interrupted"
	// Failed: PostgreSQL or Redis could not be read or written; it is
	// tried again with backoff.
	Failed Outcome = "failed"
)

// outcome of attempt when another instance holds the lock (not counted).
const busy Outcome = "busy"

// Recovery is the watchdog loop with its rebuild.
type Recovery struct {
	store  Store
	source Source
	opt    Options
	logger *slog.Logger
	clock  clock.Clock

	losses     metric.Int64Counter
	recoveries metric.Int64Counter
	flights    metric.Int64Counter
	duration   metric.Float64Histogram
	gauge      metric.Float64ObservableGauge
	reg        metric.Registration

	// complete is the last status seen: 1 complete, 0 incomplete, -1
	// unknown (Redis could not be read, or no check yet).
	complete atomic.Int32
}

// New returns the watchdog; logger should not carry a component yet.
func New(st Store, src Source, logger *slog.Logger, clk clock.Clock, meter metric.Meter, opt Options) (*Recovery, error) {
	r := &Recovery{store: st, source: src, opt: opt, logger: logger.With("component", ServiceName), clock: clk}
	r.complete.Store(-1)
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	r.losses = counter("msgx_projector_projection_losses_total",
		"times the watchdog found the Redis projection incomplete (lost, or never built); at=startup for the first check of a process, at=running after it had been complete")
	r.recoveries = counter("msgx_projector_recoveries_total",
		"rebuilds of the projection from PostgreSQL this instance attempted, by outcome (complete, already_complete, interrupted, failed)")
	r.flights = counter("msgx_projector_recovery_flights_total",
		"flights read from PostgreSQL and written to Redis by rebuilds of the projection")
	var err error
	r.duration, err = meter.Float64Histogram("msgx_projector_recovery_duration_seconds",
		metric.WithDescription("duration of completed rebuilds of the projection from PostgreSQL"), metric.WithUnit("s"))
	errs = append(errs, err)
	r.gauge, err = meter.Float64ObservableGauge("msgx_projector_projection_complete",
		metric.WithDescription("1 while the Redis projection is complete and served, 0 while it is lost or being rebuilt (GET /all/flights answers 503), NaN when Redis cannot be read"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("creating recovery metrics: %w", err)
	}
	// Exported at zero from the start, so alerts on any increase work from
	// the first scrape (R-I4).
	for _, at := range []string{"startup", "running"} {
		r.losses.Add(context.Background(), 0, metric.WithAttributes(attribute.String("at", at)))
	}
	for _, out := range []Outcome{Completed, AlreadyComplete, Interrupted, Failed} {
		r.recoveries.Add(context.Background(), 0, metric.WithAttributes(attribute.String("outcome", string(out))))
	}
	r.flights.Add(context.Background(), 0)
	r.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		v := float64(r.complete.Load())
		if v < 0 {
			v = math.NaN()
		}
		o.ObserveFloat64(r.gauge, v)
		return nil
	}, r.gauge)
	if err != nil {
		return nil, fmt.Errorf("registering the projection gauge: %w", err)
	}
	return r, nil
}

// Service returns the watchdog's lifecycle service.
func (r *Recovery) Service() *lifecycle.Service {
	return lifecycle.NewService(ServiceName, nil, r.Run, func(error) error {
		if err := r.reg.Unregister(); err != nil {
			return fmt.Errorf("unregistering the projection gauge: %w", err)
		}
		return nil
	})
}

// Run checks the projection every Interval and rebuilds it from
// PostgreSQL whenever it is incomplete, until ctx ends.
func (r *Recovery) Run(ctx context.Context) error {
	retry := backoff.New(100*time.Millisecond, r.opt.BackoffMax)
	first := true
	var downSince time.Time
	for {
		wait := r.opt.Interval
		sctx, cancel := context.WithTimeout(ctx, r.opt.RedisTimeout)
		st, err := r.store.Status(sctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if downSince.IsZero() {
				downSince = r.clock.Now()
				r.logger.Warn("cannot read the projection's status from Redis; checking again", "err", err)
			}
			r.complete.Store(-1)
		case st.Complete():
			if !downSince.IsZero() {
				r.logger.Info("reading the projection's status from Redis again", "unreadable_for", r.clock.Now().Sub(downSince).String())
				downSince = time.Time{}
			}
			if r.complete.Swap(1) == 0 {
				r.logger.Info("the projection is complete and served again")
			}
			retry = backoff.New(100*time.Millisecond, r.opt.BackoffMax)
		default:
			downSince = time.Time{}
			if prev := r.complete.Swap(0); prev != 0 {
				at := "running"
				if first {
					at = "startup"
				}
				r.losses.Add(ctx, 1, metric.WithAttributes(attribute.String("at", at)))
				r.logger.Error("the Redis projection is incomplete; GET /all/flights and the flight board answer 503 and readiness fails until it is rebuilt from PostgreSQL, which starts now",
					"reason", st.Err().Error(), "documents", st.Docs, "counted", st.Counted, "at", at)
			}
			out := r.attempt(ctx)
			if ctx.Err() != nil {
				return nil
			}
			switch out {
			case Completed, AlreadyComplete, Interrupted:
				wait = 0 // check at once: served again, or start over
			case Failed:
				wait = retry.Next()
			}
		}
		first = false
		if wait > 0 {
			if err := backoff.Sleep(ctx, wait); err != nil {
				return nil
			}
		}
	}
}

// attempt runs one rebuild unless another instance holds the lock.
func (r *Recovery) attempt(ctx context.Context) Outcome {
	start := r.clock.Now()
	out, n, err := r.rebuild(ctx)
	if out == busy {
		return out
	}
	if ctx.Err() != nil {
		return Failed
	}
	r.recoveries.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(out))))
	took := r.clock.Now().Sub(start)
	switch out {
	case Completed:
		r.duration.Record(ctx, took.Seconds())
		r.logger.Info("rebuilt the projection from PostgreSQL; serving it again", "flights", n, "took", took.String())
		if r.opt.OnChanged != nil {
			r.opt.OnChanged()
		}
	case AlreadyComplete:
		r.logger.Info("another projector instance rebuilt the projection")
	case Interrupted:
		r.logger.Warn("the projection rebuild was interrupted (Redis lost data or the rebuild lock meanwhile); starting over", "flights_written", n, "err", err)
	case Failed:
		r.logger.Warn("rebuilding the projection from PostgreSQL failed; retrying", "flights_written", n, "err", err)
	}
	return out
}

// marker is the value of the completeness marker: who built the
// projection, when, and from how many flights.
type marker struct {
	BuiltAt string `json:"built_at"`
	By      string `json:"by"`
	Flights int64  `json:"flights"`
}

// rebuild writes every PostgreSQL flight to Redis under the lock and sets
// the marker. It returns the outcome, the flights written and, for
// Failed and Interrupted, why.
func (r *Recovery) rebuild(ctx context.Context) (Outcome, int64, error) {
	token, err := newToken(r.opt.Instance)
	if err != nil {
		return Failed, 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, r.opt.RedisTimeout)
	ok, err := r.store.AcquireRebuildLock(rctx, token, r.opt.LockTTL)
	cancel()
	if err != nil {
		return Failed, 0, err
	}
	if !ok {
		r.logger.Debug("another projector instance is rebuilding the projection; waiting for it")
		return busy, 0, nil
	}
	defer func() {
		// Released even when shutdown has begun; on a completed rebuild the
		// finish already released it and this is a no-op.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opt.RedisTimeout)
		defer cancel()
		if err := r.store.ReleaseRebuildLock(rctx, token); err != nil {
			r.logger.Warn("releasing the projection rebuild lock failed; it expires by itself", "ttl", r.opt.LockTTL.String(), "err", err)
		}
	}()
	rctx, cancel = context.WithTimeout(ctx, r.opt.RedisTimeout)
	begun, err := r.store.BeginRebuild(rctx, token)
	cancel()
	switch {
	case err != nil:
		return Failed, 0, err
	case begun == store.BeginAlreadyComplete:
		return AlreadyComplete, 0, nil
	case begun == store.BeginLockLost:
		return Interrupted, 0, errLockLost
	}
	r.logger.Info("rebuilding the projection from PostgreSQL", "page_size", r.opt.PageSize)
	start := r.clock.Now()
	lastRenew, lastLog := start, start
	var written int64
	for after := int64(math.MinInt64); ; {
		page, err := r.source.Page(ctx, after, r.opt.PageSize)
		if err != nil {
			return Failed, written, err
		}
		if len(page) == 0 {
			break
		}
		actx, cancel := context.WithTimeout(ctx, r.opt.RedisTimeout)
		_, err = r.store.Apply(actx, page)
		cancel()
		if err != nil {
			return Failed, written, err
		}
		written += int64(len(page))
		r.flights.Add(ctx, int64(len(page)))
		after = page[len(page)-1].FLID
		now := r.clock.Now()
		if now.Sub(lastRenew) >= r.opt.LockTTL/3 {
			rctx, cancel := context.WithTimeout(ctx, r.opt.RedisTimeout)
			held, err := r.store.RenewRebuildLock(rctx, token, r.opt.LockTTL)
			cancel()
			if err != nil {
				return Failed, written, err
			}
			if !held {
				return Interrupted, written, errLockLost
			}
			lastRenew = now
		}
		if now.Sub(lastLog) >= progressEvery {
			lastLog = now
			r.logger.Info("rebuilding the projection from PostgreSQL: still writing", "flights_written", written, "last_flid", after,
				"elapsed", now.Sub(start).String())
		}
	}
	m, err := json.Marshal(marker{BuiltAt: r.clock.Now().UTC().Format(time.RFC3339Nano), By: r.opt.Instance, Flights: written})
	if err != nil {
		return Failed, written, fmt.Errorf("encoding the completeness marker: %w", err)
	}
	rctx, cancel = context.WithTimeout(ctx, r.opt.RedisTimeout)
	fin, err := r.store.FinishRebuild(rctx, token, string(m))
	cancel()
	switch {
	case err != nil:
		return Failed, written, err
	case fin == store.FinishLockLost:
		return Interrupted, written, errLockLost
	case fin == store.FinishDataLost:
		return Interrupted, written, errDataLost
	}
	r.complete.Store(1)
	return Completed, written, nil
}

// newToken returns a lock token unique to this attempt.
func newToken(instance string) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a rebuild lock token: %w", err)
	}
	return instance + "/" + hex.EncodeToString(b), nil
}
