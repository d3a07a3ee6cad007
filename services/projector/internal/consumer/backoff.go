package consumer

import (
	"context"
	"time"
)

// initialBackoff is the first wait after a failed attempt.
const initialBackoff = 100 * time.Millisecond

// backoff is a capped exponential delay: 100ms, doubling, at most max.
type backoff struct {
	next time.Duration
	max  time.Duration
}

func newBackoff(maxDelay time.Duration) *backoff {
	return &backoff{next: min(initialBackoff, maxDelay), max: maxDelay}
}

// delay returns the wait before the next attempt and doubles the one after.
func (b *backoff) delay() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

// waitFor blocks for d or until ctx ends, whichever comes first; it returns
// the context's cause in the second case.
func waitFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
