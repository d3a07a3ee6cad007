package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scripted is a Client whose answers the test decides.
type scripted struct {
	acquire func(ctx context.Context, n int) (Grant, error) // n counts calls from 1
	renew   func(ctx context.Context, n int) (time.Time, error)

	mu                  sync.Mutex
	acquires, renews    int
	released            []int64
	releaseCtxCancelled bool
}

func (s *scripted) Acquire(ctx context.Context, _, _ string, _ time.Duration) (Grant, error) {
	s.mu.Lock()
	s.acquires++
	n := s.acquires
	s.mu.Unlock()
	return s.acquire(ctx, n)
}

func (s *scripted) Renew(ctx context.Context, _, _ string, _ int64, _ time.Duration) (time.Time, error) {
	s.mu.Lock()
	s.renews++
	n := s.renews
	s.mu.Unlock()
	if s.renew == nil {
		return time.Now().Add(time.Second), nil
	}
	return s.renew(ctx, n)
}

func (s *scripted) Release(ctx context.Context, _, _ string, token int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, token)
	s.releaseCtxCancelled = ctx.Err() != nil
	return true, nil
}

func (s *scripted) releasedTokens() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.released...)
}

func (s *scripted) renewCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renews
}

// grantToken returns an acquire function granting token n on call n.
func grantToken(ctx context.Context, n int) (Grant, error) {
	return Grant{Token: int64(n), ExpiresAt: time.Now().Add(time.Second)}, nil
}

// runElector runs e.Run in the background until the test ends and returns
// a channel with its result.
func runElector(t *testing.T, e *Elector, fn func(context.Context, int64) error) (cancel func(), done <-chan error) {
	t.Helper()
	ctx, cancelFn := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ch <- e.Run(ctx, "processor", "host/1/abcd", fn)
	}()
	t.Cleanup(func() {
		cancelFn()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("elector did not stop")
		}
	})
	return cancelFn, ch
}

func newTestElector(t *testing.T, c Client, opt Options) *Elector {
	t.Helper()
	e, err := NewElector(c, opt)
	require.NoError(t, err)
	return e
}

// TestNewElector_R_B8_DefaultsTakeOverWithin15s: the defaults bound the
// takeover after the active instance died by TTL + Retry = 12 s.
func TestNewElector_R_B8_DefaultsTakeOverWithin15s(t *testing.T) {
	t.Parallel()
	e := newTestElector(t, &scripted{}, Options{})
	o := e.Options()
	require.Equal(t, 10*time.Second, o.TTL)
	require.Equal(t, 2*time.Second, o.Retry)
	require.LessOrEqual(t, o.TTL+o.Retry, 12*time.Second)
	require.Less(t, o.RenewInterval, o.TTL-o.SafetyMargin)
	require.Equal(t, o.TTL/3, o.RenewInterval)
	require.Equal(t, o.TTL/5, o.SafetyMargin)
}

func TestNewElector_RefusesContradictoryOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  Options
		want string
	}{
		{"NegativeRetry", Options{Retry: -time.Second}, "must not be negative"},
		{"MarginNotBelowTTL", Options{TTL: time.Second, SafetyMargin: time.Second}, "safety margin"},
		{"RenewTooLate", Options{TTL: time.Second, SafetyMargin: 200 * time.Millisecond, RenewInterval: 900 * time.Millisecond}, "renew interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewElector(&scripted{}, tc.opt)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := NewElector(nil, Options{})
	require.Error(t, err)
}

// TestElector_R_B8_StandbyUntilAcquired: while the lease is held elsewhere
// the elector stays standby and polls every Retry; fn runs once acquired.
func TestElector_R_B8_StandbyUntilAcquired(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: func(_ context.Context, n int) (Grant, error) {
		if n < 4 {
			return Grant{}, fmt.Errorf("acquiring: %w (current holder other)", ErrHeld)
		}
		return Grant{Token: 7}, nil
	}}
	e := newTestElector(t, c, Options{TTL: time.Second, Retry: 10 * time.Millisecond})
	started := make(chan int64, 1)
	runElector(t, e, func(ctx context.Context, token int64) error {
		started <- token
		<-ctx.Done()
		return nil
	})
	select {
	case tok := <-started:
		require.Equal(t, int64(7), tok)
	case <-time.After(5 * time.Second):
		t.Fatal("fn never started")
	}
}

// TestElector_R_B8_RefusedRenewalCancelsFn: a renewal refused with ErrLost
// cancels fn's context at once, with cause ErrLost; the elector releases
// the lease and goes back to standby.
func TestElector_R_B8_RefusedRenewalCancelsFn(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: grantToken, renew: func(context.Context, int) (time.Time, error) {
		return time.Time{}, fmt.Errorf("renewing: %w", ErrLost)
	}}
	e := newTestElector(t, c, Options{TTL: 10 * time.Second, RenewInterval: 20 * time.Millisecond, Retry: 20 * time.Millisecond})
	type term struct {
		token int64
		cause error
	}
	terms := make(chan term, 10)
	runElector(t, e, func(ctx context.Context, token int64) error {
		<-ctx.Done()
		terms <- term{token, context.Cause(ctx)}
		return ctx.Err()
	})
	for want := int64(1); want <= 2; want++ {
		select {
		case tm := <-terms:
			require.Equal(t, want, tm.token, "after a loss the elector stands by and acquires a new term")
			require.ErrorIs(t, tm.cause, ErrLost)
		case <-time.After(5 * time.Second):
			t.Fatal("fn not cancelled after the refused renewal (TTL 10s: only the refusal can have ended it)")
		}
	}
	require.Eventually(t, func() bool { r := c.releasedTokens(); return len(r) >= 1 && r[0] == 1 }, 5*time.Second, time.Millisecond)
}

// TestElector_R_B8_NoRenewalBeforeDeadlineCancelsFn: when no renewal gets
// through (control plane unreachable), fn is cancelled with ErrLost at
// the local deadline TTL - SafetyMargin after the acquisition was sent,
// before the lease can expire on the server.
func TestElector_R_B8_NoRenewalBeforeDeadlineCancelsFn(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: grantToken, renew: func(ctx context.Context, _ int) (time.Time, error) {
		<-ctx.Done() // unreachable: every call runs into its timeout
		return time.Time{}, ctx.Err()
	}}
	const ttl = 600 * time.Millisecond
	e := newTestElector(t, c, Options{TTL: ttl, SafetyMargin: 200 * time.Millisecond, Retry: time.Hour})
	type result struct {
		cause   error
		elapsed time.Duration
	}
	results := make(chan result, 1)
	runElector(t, e, func(ctx context.Context, _ int64) error {
		start := time.Now()
		<-ctx.Done()
		results <- result{context.Cause(ctx), time.Since(start)}
		return nil
	})
	select {
	case r := <-results:
		require.ErrorIs(t, r.cause, ErrLost)
		require.Less(t, r.elapsed, ttl, "fn must be cancelled before the server-side expiry")
		require.Greater(t, r.elapsed, 300*time.Millisecond, "not before the local deadline")
	case <-time.After(5 * time.Second):
		t.Fatal("fn not cancelled")
	}
	require.GreaterOrEqual(t, c.renewCount(), 1)
}

// TestElector_RenewalsKeepTheTerm: successful renewals move the deadline,
// so fn keeps running across several TTLs.
func TestElector_RenewalsKeepTheTerm(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: grantToken}
	e := newTestElector(t, c, Options{TTL: 300 * time.Millisecond, Retry: time.Hour})
	var cancelled atomic.Bool
	started := make(chan struct{})
	runElector(t, e, func(ctx context.Context, _ int64) error {
		close(started)
		<-ctx.Done()
		cancelled.Store(true)
		return nil
	})
	<-started
	// Ten renewals span more than three TTLs.
	require.Eventually(t, func() bool { return c.renewCount() >= 10 }, 10*time.Second, time.Millisecond)
	require.False(t, cancelled.Load(), "fn cancelled although every renewal succeeded")
}

// TestElector_FnReturnReleasesAndStandsBy: when fn returns, the lease is
// released with a live context even if fn failed, and the elector
// acquires again after Retry.
func TestElector_FnReturnReleasesAndStandsBy(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: grantToken}
	e := newTestElector(t, c, Options{TTL: time.Second, Retry: 10 * time.Millisecond})
	var runs atomic.Int64
	runElector(t, e, func(context.Context, int64) error {
		runs.Add(1)
		return errors.New("boom")
	})
	require.Eventually(t, func() bool { return runs.Load() >= 3 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return len(c.releasedTokens()) >= 2 }, 5*time.Second, time.Millisecond)
	require.Equal(t, []int64{1, 2}, c.releasedTokens()[:2])
	c.mu.Lock()
	require.False(t, c.releaseCtxCancelled)
	c.mu.Unlock()
}

// TestElector_ShutdownReleasesAndReturnsNil: cancelling Run's context
// stops fn, releases the lease and returns nil.
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestElector_ShutdownReleasesAndReturnsNil(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: grantToken}
	e := newTestElector(t, c, Options{TTL: time.Second})
	started := make(chan struct{})
	cancel, done := runElector(t, e, func(ctx context.Context, _ int64) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	<-started
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	require.Equal(t, []int64{1}, c.releasedTokens())
}

// TestElector_R_F6_RejectedCallsStopRun: a call the control plane rejects
// (wrong token, bad argument) ends Run with the error instead of polling
// forever, so a misconfigured instance fails visibly.
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestElector_R_F6_RejectedCallsStopRun(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: func(context.Context, int) (Grant, error) {
		return Grant{}, fmt.Errorf("acquiring: %w: unauthenticated", ErrRejected)
	}}
	e := newTestElector(t, c, Options{Retry: time.Millisecond})
	_, done := runElector(t, e, func(context.Context, int64) error {
		t.Error("fn must not run")
		return nil
	})
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrRejected)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not give up")
	}
	err := e.Run(context.Background(), "", "h", func(context.Context, int64) error { return nil })
	require.ErrorIs(t, err, ErrRejected)
}

// TestElector_TransientAcquireErrorsAreRetried: an unreachable control
// plane keeps the elector standby, retrying.
func TestElector_TransientAcquireErrorsAreRetried(t *testing.T) {
	t.Parallel()
	c := &scripted{acquire: func(_ context.Context, n int) (Grant, error) {
		if n < 3 {
			return Grant{}, errors.New("connection refused")
		}
		return Grant{Token: 3}, nil
	}}
	e := newTestElector(t, c, Options{TTL: time.Second, Retry: 5 * time.Millisecond})
	started := make(chan int64, 1)
	runElector(t, e, func(ctx context.Context, token int64) error {
		started <- token
		<-ctx.Done()
		return nil
	})
	select {
	case tok := <-started:
		require.Equal(t, int64(3), tok)
	case <-time.After(5 * time.Second):
		t.Fatal("fn never started")
	}
}
