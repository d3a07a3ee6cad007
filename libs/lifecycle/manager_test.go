package lifecycle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestManager(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Run("StartsInOrderStopsInReverse", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var events []string
		rec := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
		mk := func(name string) *Service {
			return NewService(name,
				func(context.Context) error { rec("start " + name); return nil },
				func(ctx context.Context) error { <-ctx.Done(); return nil },
				func(error) error { rec("stop " + name); return nil })
		}
		m := NewManager(logger, mk("a"), mk("b"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		require.Eventually(t, func() bool { return m.Ready() == nil }, 5*time.Second, time.Millisecond)
		cancel()
		require.NoError(t, <-done)
		require.Equal(t, []string{"start a", "start b", "stop b", "stop a"}, events)
	})

	t.Run("OneFailureStopsAll", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		fail := make(chan struct{})
		a := NewService("a", nil, func(ctx context.Context) error { <-ctx.Done(); return nil }, nil)
		b := NewService("b", nil, func(ctx context.Context) error {
			select {
			case <-fail:
				return boom
			case <-ctx.Done():
				return nil
			}
		}, nil)
		m := NewManager(logger, a, b)
		done := make(chan error)
		go func() { done <- m.Run(context.Background()) }()
		require.Eventually(t, func() bool { return m.Ready() == nil }, 5*time.Second, time.Millisecond)
		close(fail)
		err := <-done
		require.ErrorIs(t, err, boom)
		require.Equal(t, Terminated, a.State())
		require.Equal(t, Failed, b.State())
	})

	t.Run("StartingFailureNeverRuns", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("no db")
		ran := false
		a := NewService("a", func(context.Context) error { return boom }, func(context.Context) error { ran = true; return nil }, nil)
		later := NewService("later", nil, nil, nil)
		err := NewManager(logger, a, later).Run(context.Background())
		require.ErrorIs(t, err, boom)
		require.False(t, ran)
		require.Equal(t, Terminated, later.State())
	})

	t.Run("StopIsIdempotentAndToleratesNeverStarted", func(t *testing.T) {
		t.Parallel()
		s := NewService("x", nil, nil, nil)
		s.StopAsync()
		s.StopAsync()
		require.NoError(t, s.AwaitTerminated(context.Background()))
	})
}

// TestAwaitRunning_ReportsStartFailure: a service whose Starting fails makes
// AwaitRunning return that failure, never a "not Running" without cause.
func TestAwaitRunning_ReportsStartFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("topic missing")
	for i := 0; i < 200; i++ {
		s := NewService("x", func(context.Context) error { return boom }, nil, nil)
		require.NoError(t, s.Start(context.Background()))
		require.ErrorIs(t, s.AwaitRunning(context.Background()), boom)
	}
}

// TestManager_StopDeadlineAbandonsAStuckService: a service that does not
// stop (a client blocked on a dependency that never answers) cannot hold
// the process past the stop deadline: Run returns ErrStopDeadline naming
// it, the services after it in stop order are still stopped, and the
// first started (stopped last) is stopped too.
func TestManager_StopDeadlineAbandonsAStuckService(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	var lastStopped atomic.Bool
	first := NewService("control", nil, func(ctx context.Context) error { <-ctx.Done(); return nil },
		func(error) error { lastStopped.Store(true); return nil })
	stuck := NewService("stuck", nil, func(ctx context.Context) error { <-ctx.Done(); return nil },
		func(error) error { <-release; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	m := NewManager(slog.New(slog.DiscardHandler), first, stuck).WithStopTimeout(200 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	require.NoError(t, first.AwaitRunning(context.Background()))
	require.NoError(t, stuck.AwaitRunning(context.Background()))
	start := time.Now()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its stop deadline")
	}
	require.ErrorIs(t, err, ErrStopDeadline)
	require.ErrorContains(t, err, "stuck")
	require.Less(t, time.Since(start), 5*time.Second)
	require.Eventually(t, lastStopped.Load, 5*time.Second, 10*time.Millisecond, "the first service is asked to stop and stops")
}
