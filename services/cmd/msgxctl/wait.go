package main

import (
	"context"
	"time"
)

// awaitSettled asks get for a request's current state every poll while
// pending holds for it, and returns the first state that is no longer
// pending. When ctx ends first it returns late's error, which names the
// request and says how to follow it: the request itself stays queued, so
// the command's timeout never loses it.
func awaitSettled[T any](ctx context.Context, cur T, poll time.Duration, pending func(T) bool,
	get func(context.Context) (T, error), late func(T, error) error,
) (T, error) {
	for pending(cur) {
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return cur, late(cur, ctx.Err())
		case <-t.C:
		}
		next, err := get(ctx)
		if err != nil && ctx.Err() != nil {
			// The timeout ran out during the look, not before it: the
			// request is as late as if it had run out between two.
			return cur, late(cur, ctx.Err())
		}
		if err != nil {
			return cur, err
		}
		cur = next
	}
	return cur, nil
}
