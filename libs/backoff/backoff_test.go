package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackoff_DoublesToTheCap(t *testing.T) {
	t.Parallel()
	b := Schedule{First: 100 * time.Millisecond, Max: 500 * time.Millisecond}.Start()
	var got []time.Duration
	for i := 0; i < 5; i++ {
		got = append(got, b.Next())
	}
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}, got)
	require.Equal(t, 50*time.Millisecond, Schedule{First: time.Second, Max: 50 * time.Millisecond}.Start().Next(), "the first delay is bounded by the cap")
}

// TestNew_R_L2_TwoInstancesBackOffApartWithinTheBounds: two instances
// retrying one dependency, each drawing its jitter from its own source
// (seeded here, so the test is deterministic), wait differently after the
// same failures, and every wait lies within [d/2, d] of the capped
// doubling d — never more than the cap (R-L2: at most 1 min between
// tries). New, the loops' Backoff, jitters the same way.
func TestNew_R_L2_TwoInstancesBackOffApartWithinTheBounds(t *testing.T) {
	t.Parallel()
	exact := Schedule{First: time.Second, Max: time.Minute}
	instance := func(seed uint64) []time.Duration {
		b := Schedule{First: time.Second, Max: time.Minute, Jitter: DefaultJitter, Rand: rand.New(rand.NewPCG(seed, seed)).Float64}.Start()
		var waits []time.Duration
		for n := 1; n <= 10; n++ {
			w := b.Next()
			d := exact.Delay(n)
			require.GreaterOrEqual(t, w, d/2, "failure %d", n)
			require.LessOrEqual(t, w, d, "failure %d", n)
			waits = append(waits, w)
		}
		return waits
	}
	a, b := instance(1), instance(2)
	require.NotEqual(t, a, b, "two instances do not retry in step")
	require.Equal(t, a, instance(1), "an injected source makes the schedule repeatable")
	t.Logf("instance 1: %v", a)
	t.Logf("instance 2: %v", b)

	n1, n2 := New(time.Second, time.Minute), New(time.Second, time.Minute)
	differ := false
	for n := 1; n <= 10; n++ {
		w1, w2, d := n1.Next(), n2.Next(), exact.Delay(n)
		require.True(t, w1 >= d/2 && w1 <= d && w2 >= d/2 && w2 <= d, "failure %d: %v %v outside [%v, %v]", n, w1, w2, d/2, d)
		differ = differ || w1 != w2
	}
	require.True(t, differ, "New jitters")
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
	err := Retry(context.Background(), Schedule{First: time.Microsecond, Max: 4 * time.Microsecond}.Start(), func() error {
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

func TestSchedule_JitterStaysWithinTheCapAndSpreads(t *testing.T) {
	t.Parallel()
	fixed := func(v float64) func() float64 { return func() float64 { return v } }
	s := Schedule{First: time.Second, Max: time.Minute, Jitter: 0.5}
	// The lowest draw keeps the whole wait, the highest takes half of it off.
	s.Rand = fixed(0)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, []time.Duration{s.Delay(0), s.Delay(2), s.Delay(3)})
	require.Equal(t, time.Minute, s.Delay(40), "capped, never overflowing")
	s.Rand = fixed(0.999999)
	require.InDelta(t, float64(500*time.Millisecond), float64(s.Delay(1)), float64(time.Millisecond))
	require.InDelta(t, float64(30*time.Second), float64(s.Delay(1000)), float64(time.Millisecond))

	// With real randomness every wait lies in [d/2, d] and they differ.
	s.Rand = nil
	seen := map[time.Duration]bool{}
	for i := 0; i < 50; i++ {
		d := s.Delay(10)
		require.GreaterOrEqual(t, d, 30*time.Second)
		require.LessOrEqual(t, d, time.Minute)
		seen[d] = true
	}
	require.Greater(t, len(seen), 1, "jitter spreads the waits")
}

func TestSchedule_StartWalksAndResets(t *testing.T) {
	t.Parallel()
	b := Schedule{First: time.Millisecond, Max: 3 * time.Millisecond}.Start()
	require.Equal(t, time.Millisecond, b.Next())
	require.Equal(t, 2*time.Millisecond, b.Next())
	require.Equal(t, 3*time.Millisecond, b.Next())
	b.Reset()
	require.Equal(t, time.Millisecond, b.Next())
}
