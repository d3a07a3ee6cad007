package consumer

import (
	"context"
	"time"

	"msgexchange/libs/backoff"
)

// initialBackoff is the first wait after a failed attempt.
const initialBackoff = 100 * time.Millisecond

// newBackoff is the consumer's retry delay: 100ms, doubling, at most
// maxDelay, with libs/backoff's jitter.
func newBackoff(maxDelay time.Duration) *backoff.Backoff {
	return backoff.New(initialBackoff, maxDelay)
}

// waitFor blocks for d or until ctx ends, whichever comes first; it returns
// the context's cause in the second case.
func waitFor(ctx context.Context, d time.Duration) error { return backoff.Sleep(ctx, d) }
