package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPollWait_R_M3_WaitsAfterFailedPollsOnlyAndStartsOver: a loop waits
// only after a poll that brought errors and no record, Retry's steps
// growing to at most a second, and a poll without an error starts the
// schedule over — the loops' rule after a broker outage (R-M3).
func TestPollWait_R_M3_WaitsAfterFailedPollsOnlyAndStartsOver(t *testing.T) {
	t.Parallel()
	var waits []time.Duration
	w := NewPollWait()
	w.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	ctx := context.Background()
	down := errors.New("broker unreachable")

	for range 6 {
		require.NoError(t, w.After(ctx, down, 0))
	}
	require.Len(t, waits, 6, "one wait after each failed poll")
	for i, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		require.LessOrEqual(t, waits[i], want, "wait %d", i+1)
		require.GreaterOrEqual(t, waits[i], want/2, "wait %d (jitter takes at most half)", i+1)
	}

	require.NoError(t, w.After(ctx, down, 3))
	require.Len(t, waits, 6, "a failed poll that brought records does not wait: the records come first")
	require.NoError(t, w.After(ctx, down, 0))
	require.GreaterOrEqual(t, waits[6], 500*time.Millisecond, "records do not start the schedule over")

	require.NoError(t, w.After(ctx, nil, 0))
	require.Len(t, waits, 7, "a poll without an error does not wait")
	require.NoError(t, w.After(ctx, down, 0))
	require.LessOrEqual(t, waits[7], 100*time.Millisecond, "after a poll without an error the schedule starts over")
}

// TestPollWait_R_M3_StopsWaitingWhenTheLoopStops: the wait ends with the
// loop's context.
func TestPollWait_R_M3_StopsWaitingWhenTheLoopStops(t *testing.T) {
	t.Parallel()
	w := NewPollWait()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, w.After(ctx, errors.New("broker unreachable"), 0), context.Canceled)
}
