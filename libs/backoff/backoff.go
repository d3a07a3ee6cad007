// Package backoff is the one capped exponential schedule with jitter and
// the context-aware wait that the services' retry loops share, so that every
// loop backs off the same way, many instances retrying one dependency after
// an outage do not all come back in the same instant, and every loop stops
// waiting as soon as it is asked to stop.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Schedule is a capped exponential schedule: the wait after the n-th
// failure is First·2^(n-1), at most Max, of which a random share of up to
// Jitter is taken off. The schedule is a pure function of n (and Rand), so a
// caller that stores only an attempt count — an outbox row, a head — gets
// the same schedule as a loop that keeps a Backoff, and computes the next
// attempt's time with its own (injectable) clock.
type Schedule struct {
	// First is the wait after the first failure.
	First time.Duration
	// Max caps every wait; jitter only ever shortens it.
	Max time.Duration
	// Jitter in [0, 1] is the largest share of a wait taken off at random:
	// 0.5 spreads a wait d over [d/2, d]. 0 means none (deterministic).
	Jitter float64
	// Rand returns a number in [0, 1); nil means math/rand/v2's Float64.
	// Tests inject a fixed source.
	Rand func() float64
}

// DefaultJitter is the jitter of the services' retry schedules: a wait d is
// spread over [d/2, d].
const DefaultJitter = 0.5

// Delay returns the wait after the n-th failed attempt (n < 1 counts as 1).
func (s Schedule) Delay(n int) time.Duration {
	d := min(s.First, s.Max)
	for i := 1; i < n && d < s.Max; i++ {
		d *= 2
	}
	d = min(d, s.Max)
	j := min(max(s.Jitter, 0), 1)
	if j == 0 || d <= 0 {
		return d
	}
	r := s.Rand
	if r == nil {
		r = rand.Float64
	}
	return d - time.Duration(j*r()*float64(d))
}

// Backoff walks a Schedule one failure at a time, for loops that keep their
// own count. The zero value is not usable; use New or Schedule.Start.
type Backoff struct {
	s Schedule
	n int
}

// New returns the services' retry Backoff: starting at first (bounded by
// maxDelay), doubling to maxDelay, with DefaultJitter drawn from
// math/rand/v2, so that instances retrying one dependency after an outage
// spread out instead of coming back in step. A loop that needs its own
// random source (a deterministic test) or no jitter walks a Schedule
// (Schedule.Start).
func New(first, maxDelay time.Duration) *Backoff {
	return Schedule{First: first, Max: maxDelay, Jitter: DefaultJitter}.Start()
}

// Start returns a Backoff that walks s from its first wait.
func (s Schedule) Start() *Backoff { return &Backoff{s: s} }

// Next returns the wait before the next attempt and moves one step on.
func (b *Backoff) Next() time.Duration {
	b.n++
	return b.s.Delay(b.n)
}

// Reset starts the schedule over, after a success.
func (b *Backoff) Reset() { b.n = 0 }

// Sleep blocks for d or until ctx ends, whichever comes first; in the second
// case it returns the context's cause.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Retry calls fn until it succeeds or ctx ends, waiting b's delays between
// attempts; onRetry (optional) hears each failure and the wait before the
// next attempt. It returns nil on success and the context's cause when ctx
// ended first.
func Retry(ctx context.Context, b *Backoff, fn func() error, onRetry func(err error, wait time.Duration)) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		wait := b.Next()
		if onRetry != nil {
			onRetry(err, wait)
		}
		if err := Sleep(ctx, wait); err != nil {
			return err
		}
	}
}
