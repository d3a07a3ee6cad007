package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackoff_DoublesToTheCap(t *testing.T) {
	t.Parallel()
	b := New(100*time.Millisecond, 500*time.Millisecond)
	var got []time.Duration
	for i := 0; i < 5; i++ {
		got = append(got, b.Next())
	}
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}, got)
	require.Equal(t, 50*time.Millisecond, New(time.Second, 50*time.Millisecond).Next(), "the first delay is bounded by the cap")
}

func TestSleep_EndsWithTheContext(t *testing.T) {
	t.Parallel()
	stop := errors.New("stopping")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stop)
	require.ErrorIs(t, Sleep(ctx, time.Hour), stop)
	require.NoError(t, Sleep(context.Background(), time.Nanosecond))
}

func TestRetry_UntilSuccessOrContextEnd(t *testing.T) {
	t.Parallel()
	calls := 0
	var waits []time.Duration
	err := Retry(context.Background(), New(time.Microsecond, 4*time.Microsecond), func() error {
		calls++
		if calls < 4 {
			return errors.New("not yet")
		}
		return nil
	}, func(_ error, w time.Duration) { waits = append(waits, w) })
	require.NoError(t, err)
	require.Equal(t, 4, calls)
	require.Equal(t, []time.Duration{time.Microsecond, 2 * time.Microsecond, 4 * time.Microsecond}, waits)

	stop := errors.New("stopping")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stop)
	require.ErrorIs(t, Retry(ctx, New(time.Hour, time.Hour), func() error { return errors.New("down") }, nil), stop)
}
