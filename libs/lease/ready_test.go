package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestElector_R_M2_ReadyReflectsALostTerm: an Elector is ready while the
// control plane answers its lease calls — grants and renewals, and
// refusals too — and not ready once no call got an answer for a TTL (the
// active instance's renewals timed out and its term was lost); it is
// ready again with the next answer.
func TestElector_R_M2_ReadyReflectsALostTerm(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	unreachable := errors.New("control plane unreachable")
	c := &scripted{
		acquire: func(ctx context.Context, n int) (Grant, error) {
			if down.Load() {
				return Grant{}, unreachable
			}
			return grantToken(ctx, n)
		},
		renew: func(context.Context, int) (time.Time, error) {
			if down.Load() {
				return time.Time{}, unreachable
			}
			return time.Now().Add(time.Second), nil
		},
	}
	const ttl = 400 * time.Millisecond
	e := newTestElector(t, c, Options{TTL: ttl, Retry: 20 * time.Millisecond})
	require.NoError(t, e.Ready(), "an Elector that runs no lease")
	lost := make(chan struct{}, 4)
	runElector(t, e, func(ctx context.Context, _ int64) error {
		<-ctx.Done()
		lost <- struct{}{}
		return nil
	})
	require.Eventually(t, func() bool { return c.renewCount() >= 2 }, 10*time.Second, time.Millisecond)
	require.NoError(t, e.Ready(), "renewals answered")

	down.Store(true)
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the term was not lost without answers")
	}
	require.Eventually(t, func() bool { return e.Ready() != nil }, 10*time.Second, time.Millisecond, "not ready a TTL after the last answer")
	require.ErrorContains(t, e.Ready(), "answered no lease call")

	down.Store(false)
	require.Eventually(t, func() bool { return e.Ready() == nil }, 10*time.Second, time.Millisecond, "ready again with the next answer")
}
