package freshness

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"

	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
)

type fakeOffsets struct {
	mu        sync.Mutex
	ends      map[int32]int64
	committed map[int32]int64
	down      bool
}

func (f *fakeOffsets) EndOffsets(context.Context) (map[int32]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errors.New("unable to dial")
	}
	return clone(f.ends), nil
}

func (f *fakeOffsets) Committed(context.Context) (map[int32]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errors.New("unable to dial")
	}
	return clone(f.committed), nil
}

func clone(m map[int32]int64) map[int32]int64 {
	out := map[int32]int64{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

type fakeMarks struct{ at time.Time }

func (f *fakeMarks) MarkCurrent(_ context.Context, at time.Time) (time.Time, error) {
	if at.After(f.at) {
		f.at = at
	}
	return f.at, nil
}

func (f *fakeMarks) CurrentAt(context.Context) (time.Time, bool, error) {
	return f.at, !f.at.IsZero(), nil
}

func TestTracker_R_N1_AgeIsTimeSinceTheProjectionHeldTheWholeTopic(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	off := &fakeOffsets{ends: map[int32]int64{0: 10, 1: 5}, committed: map[int32]int64{0: 8, 1: 5}}
	marks := &fakeMarks{}
	tr, err := New(off, marks, clk, logging.Discard(), noop.NewMeterProvider().Meter("t"), Options{Interval: time.Second, Timeout: time.Second})
	require.NoError(t, err)
	ctx := context.Background()

	tr.Probe(ctx) // sample at 08:00:00, not reached yet
	_, ok := tr.Age()
	require.False(t, ok, "unknown until the group reached a sample")

	clk.Advance(2 * time.Second)
	off.mu.Lock()
	off.committed[0] = 10 // the 08:00:00 sample is reached; new records arrive
	off.ends[1] = 7
	off.mu.Unlock()
	tr.Probe(ctx)
	age, ok := tr.Age()
	require.True(t, ok)
	require.Equal(t, 2*time.Second, age, "current as of the first sample")

	// The brokers go away: no sample, the age grows.
	off.mu.Lock()
	off.down = true
	off.mu.Unlock()
	clk.Advance(30 * time.Second)
	tr.Probe(ctx)
	age, _ = tr.Age()
	require.Equal(t, 32*time.Second, age)

	// They return with new records the group has not committed yet: the
	// age keeps growing until it has.
	off.mu.Lock()
	off.down = false
	off.ends[1] = 9
	off.mu.Unlock()
	clk.Advance(time.Second)
	tr.Probe(ctx)
	age, _ = tr.Age()
	require.Equal(t, 33*time.Second, age)
	clk.Advance(time.Second)
	off.mu.Lock()
	off.committed[1] = 9
	off.mu.Unlock()
	tr.Probe(ctx)
	age, _ = tr.Age()
	require.Equal(t, time.Duration(0), age, "the sample of this probe is reached")
}

func TestTracker_R_N1_SamplesAreBounded(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(0, 0))
	off := &fakeOffsets{ends: map[int32]int64{0: 10}, committed: map[int32]int64{0: 0}}
	tr, err := New(off, &fakeMarks{}, clk, logging.Discard(), noop.NewMeterProvider().Meter("t"), Options{Interval: time.Second, Timeout: time.Second})
	require.NoError(t, err)
	for range 3 * maxSamples {
		clk.Advance(time.Second)
		tr.Probe(context.Background())
	}
	require.Len(t, tr.samples, maxSamples)
}
