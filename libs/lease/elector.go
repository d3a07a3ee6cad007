package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/backoff"
	"msgexchange/libs/logging"
)

// Defaults of Options. With them a standby takes over at most TTL + Retry
// = 12 s after the active instance died (its last renewal was at most TTL
// before its lease expires; the standby tries every Retry), inside R-B8's
// 15 s.
const (
	DefaultTTL   = 10 * time.Second
	DefaultRetry = 2 * time.Second
)

// Options tune an Elector. Zero values take the defaults.
type Options struct {
	// TTL is the lease's time to live per acquisition and renewal. Default
	// DefaultTTL.
	TTL time.Duration
	// Retry is how often a standby tries to acquire. Default DefaultRetry.
	Retry time.Duration
	// RenewInterval is how often the active instance renews. Default TTL/3.
	RenewInterval time.Duration
	// SafetyMargin is how long before the lease could expire on the server
	// the active instance gives it up if no renewal succeeded: its local
	// deadline is (send time of the last successful acquire or renew) + TTL
	// - SafetyMargin, on the monotonic clock. It covers clock-rate drift and
	// the time the function needs to stop. Default TTL/5.
	SafetyMargin time.Duration
	// CallTimeout bounds each Acquire, Renew and Release call. Default
	// RenewInterval.
	CallTimeout time.Duration
	// Logger receives state changes; nil discards them.
	Logger *slog.Logger
	// Meter, when set, receives msgx_lease_held{lease}: 1 while this
	// process holds the lease, 0 while it is standby (R-I4).
	Meter metric.Meter
}

// Elector runs functions single-active under leases. One Elector may run
// several leases at once (one Run per name); it keeps no state between
// runs.
type Elector struct {
	client  Client
	opt     Options
	log     *slog.Logger
	holding *holding
	answers answers
}

// NewElector returns an Elector using client, or an error when the options
// contradict each other.
func NewElector(client Client, opt Options) (*Elector, error) {
	if client == nil {
		return nil, errors.New("lease: NewElector needs a Client")
	}
	if opt.TTL == 0 {
		opt.TTL = DefaultTTL
	}
	if opt.Retry == 0 {
		opt.Retry = DefaultRetry
	}
	if opt.RenewInterval == 0 {
		opt.RenewInterval = opt.TTL / 3
	}
	if opt.SafetyMargin == 0 {
		opt.SafetyMargin = opt.TTL / 5
	}
	if opt.CallTimeout == 0 {
		opt.CallTimeout = opt.RenewInterval
	}
	if opt.Logger == nil {
		opt.Logger = logging.Discard()
	}
	var errs []error
	if opt.TTL < 0 || opt.Retry < 0 || opt.RenewInterval < 0 || opt.SafetyMargin < 0 || opt.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("lease options: durations must not be negative (ttl %v, retry %v, renew interval %v, safety margin %v, call timeout %v)",
			opt.TTL, opt.Retry, opt.RenewInterval, opt.SafetyMargin, opt.CallTimeout))
	}
	if opt.SafetyMargin >= opt.TTL {
		errs = append(errs, fmt.Errorf("lease options: safety margin %v must be shorter than the ttl %v", opt.SafetyMargin, opt.TTL))
	} else if opt.RenewInterval >= opt.TTL-opt.SafetyMargin {
		errs = append(errs, fmt.Errorf("lease options: renew interval %v must be shorter than ttl - safety margin (%v), or the lease is given up before its first renewal", opt.RenewInterval, opt.TTL-opt.SafetyMargin))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	e := &Elector{client: client, opt: opt, log: opt.Logger, holding: newHolding()}
	e.answers.answered()
	if opt.Meter != nil {
		if err := e.holding.register(opt.Meter); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Options returns the effective options (defaults filled in).
func (e *Elector) Options() Options { return e.opt }

// Run keeps holder standby for lease name until it is acquired, then calls
// fn with the term's fencing token and a context that is cancelled, with
// cause ErrLost, as soon as the lease is lost: a renewal was refused, or
// the local renewal deadline passed without a successful renewal. fn must
// return promptly once its context is done, and must write to the database
// only in transactions that end with Fence(token) — best by taking all its
// writes from Writer.Term(ctx, name, token). After fn returns, for
// whatever reason, the lease is released (best effort), and after Retry
// holder is standby again. Run returns nil when ctx is done, and an error
// wrapping ErrRejected when the control plane refuses the calls as invalid
// or unauthorized (a configuration error that retrying cannot fix). fn's
// errors are logged, not returned: the lease moves to another instance.
//
// A term whose fn returns an error wrapping ErrFenced (a fenced write or
// check was refused: another instance holds the lease, or it was
// force-released or expired) is over at once: one WARN line, the
// conditional release, and holder is standby again, trying to acquire
// after Retry, doubling after each further fenced term up to TTL (with
// libs/backoff's jitter). fn must never retry the refused write or its
// side effects under the old token;
// Writer.Term enforces that.
func (e *Elector) Run(ctx context.Context, name, holder string, fn func(ctx context.Context, token int64) error) error {
	if name == "" || holder == "" {
		return fmt.Errorf("running lease %q for holder %q: %w: name and holder are required", name, holder, ErrRejected)
	}
	log := e.log.With("lease", name, "holder", holder)
	defer e.holding.run(name)()
	// Terms that end fenced one after the other back off (Retry doubling up
	// to the TTL), so a misconfigured fence cannot spin acquire and refusal.
	var fencedWait *backoff.Backoff
	for {
		g, sent, err := e.acquire(ctx, name, holder, log)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wait := e.opt.Retry
		if e.term(ctx, name, holder, g, sent, fn, log) {
			if fencedWait == nil {
				fencedWait = backoff.New(e.opt.Retry, max(e.opt.Retry, e.opt.TTL))
			}
			wait = fencedWait.Next()
		} else {
			fencedWait = nil
		}
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// Confirm asks the control plane whether holder's term token of lease name
// is still current, by renewing it. It is the fence of a component whose
// side effects are all outside PostgreSQL (see NewRemoteTerm): a term that
// ended (expired, released, force-released, taken over) returns an error
// wrapping ErrFenced and ErrLost; any other error means "unknown", and the
// side effect must wait.
func (e *Elector) Confirm(ctx context.Context, name, holder string, token int64) error {
	cctx, cancel := context.WithTimeout(ctx, e.opt.CallTimeout)
	defer cancel()
	if _, err := e.client.Renew(cctx, name, holder, token, e.opt.TTL); err != nil {
		if errors.Is(err, ErrLost) {
			return fmt.Errorf("confirming lease %s token %d: %w: %w", name, token, ErrFenced, err)
		}
		return fmt.Errorf("confirming lease %s token %d: %w", name, token, err)
	}
	return nil
}

// acquire tries every Retry until the lease is acquired. It returns the
// grant and the time the successful request was sent.
func (e *Elector) acquire(ctx context.Context, name, holder string, log *slog.Logger) (Grant, time.Time, error) {
	standby := false
	for {
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, e.opt.CallTimeout)
		g, err := e.client.Acquire(cctx, name, holder, e.opt.TTL)
		cancel()
		if err == nil || errors.Is(err, ErrHeld) {
			e.answers.answered()
		}
		switch {
		case err == nil:
			log.Info("lease acquired; active", "token", g.Token, "expires_at", g.ExpiresAt)
			return g, sent, nil
		case ctx.Err() != nil:
			return Grant{}, time.Time{}, ctx.Err()
		case isRejected(err):
			log.Error("lease call rejected; giving up", "err", err)
			return Grant{}, time.Time{}, fmt.Errorf("acquiring lease %s: %w", name, err)
		case errors.Is(err, ErrHeld):
			// Announce standby once; every further poll only at debug level.
			level := slog.LevelDebug
			if !standby {
				level, standby = slog.LevelInfo, true
			}
			log.Log(ctx, level, "lease held elsewhere; standby", "detail", err.Error())
		default:
			log.Warn("acquiring lease failed; retrying", "err", err, "retry", e.opt.Retry)
		}
		if backoff.Sleep(ctx, e.opt.Retry) != nil {
			return Grant{}, time.Time{}, ctx.Err()
		}
	}
}

// term runs fn for one term and releases the lease afterwards. It reports
// whether the term ended fenced: fn returned an error wrapping ErrFenced,
// or its context was cancelled with such a cause (Term ends it so).
func (e *Elector) term(ctx context.Context, name, holder string, g Grant, sent time.Time, fn func(context.Context, int64) error, log *slog.Logger) (fenced bool) {
	released := e.holding.hold(name)
	tctx, cancel := context.WithCancelCause(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		e.renew(tctx, cancel, name, holder, g.Token, sent.Add(e.opt.TTL-e.opt.SafetyMargin), log)
	}()
	err := fn(tctx, g.Token)
	lost := errors.Is(context.Cause(tctx), ErrLost)
	fenced = errors.Is(err, ErrFenced) || errors.Is(context.Cause(tctx), ErrFenced)
	cancel(context.Canceled)
	<-renewed
	released()
	switch {
	case fenced:
		// The one line of the term's end: fn's loops stop without logging
		// the refusal themselves.
		log.Warn("active work stopped: a fenced write or check was refused, the term is over; standby", "token", g.Token, "err", err)
	case lost:
		log.Warn("active work stopped: lease lost", "token", g.Token, "err", err)
	case ctx.Err() != nil:
		log.Info("active work stopped: shutting down", "token", g.Token, "err", err)
	case err != nil:
		log.Error("active work failed; releasing the lease", "token", g.Token, "err", err)
	default:
		log.Info("active work finished; releasing the lease", "token", g.Token)
	}
	// Release even after a loss: it is conditional on holder and token on
	// the server, so it only ends a term that is still ours.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.opt.CallTimeout)
	defer rcancel()
	if released, err := e.client.Release(rctx, name, holder, g.Token); err != nil {
		log.Warn("releasing lease failed; it expires by itself", "token", g.Token, "err", err)
	} else if released {
		log.Info("lease released", "token", g.Token)
	}
	return fenced
}

// renew renews the term every RenewInterval until tctx is done. It cancels
// the term with cause ErrLost when a renewal is refused or deadline (the
// local deadline of the last successful acquire or renew) passes first.
func (e *Elector) renew(tctx context.Context, cancel context.CancelCauseFunc, name, holder string, token int64, deadline time.Time, log *slog.Logger) {
	next := time.NewTimer(e.opt.RenewInterval)
	defer next.Stop()
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	for {
		select {
		case <-tctx.Done():
			return
		case <-expire.C:
			cancel(fmt.Errorf("%w: no successful renewal of token %d before the local deadline", ErrLost, token))
			return
		case <-next.C:
		}
		sent := time.Now()
		cctx, ccancel := context.WithTimeout(tctx, min(e.opt.CallTimeout, time.Until(deadline)))
		_, err := e.client.Renew(cctx, name, holder, token, e.opt.TTL)
		ccancel()
		if err == nil || errors.Is(err, ErrLost) {
			e.answers.answered()
		}
		switch {
		case err == nil:
			deadline = sent.Add(e.opt.TTL - e.opt.SafetyMargin)
			expire.Reset(time.Until(deadline))
			next.Reset(e.opt.RenewInterval)
		case tctx.Err() != nil:
			return
		case errors.Is(err, ErrLost):
			cancel(fmt.Errorf("renewing token %d: %w", token, err))
			return
		default:
			// Try again soon; the deadline timer ends the term if no
			// renewal gets through in time.
			log.Warn("renewing lease failed; retrying", "token", token, "err", err, "deadline_in", time.Until(deadline))
			next.Reset(max(e.opt.RenewInterval/4, time.Millisecond))
		}
	}
}
