// Package backoff is the capped exponential delay and the context-aware
// wait that the services' retry loops share, so that every loop backs off
// the same way and stops waiting as soon as it is asked to stop.
package backoff

import (
	"context"
	"time"
)

// Backoff is a capped exponential delay: the first delay, doubling after
// each use, at most the cap. The zero value is not usable; use New.
type Backoff struct {
	next, max time.Duration
}

// New returns a Backoff starting at first (bounded by maxDelay).
func New(first, maxDelay time.Duration) *Backoff {
	return &Backoff{next: min(first, maxDelay), max: maxDelay}
}

// Next returns the wait before the next attempt and doubles the one after.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

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
