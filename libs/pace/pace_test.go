package pace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/libs/pace"
)

// TestPacer_R_M5_RestsInProportionToTheStep: each step is followed by a
// rest that makes the steps Share of the time, capped by MaxRest; no rest
// after a failed step or without a share.
func TestPacer_R_M5_RestsInProportionToTheStep(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 3, 3, 30, 0, 0, time.UTC))
	var rests []time.Duration
	p := pace.Pacer{Share: 0.25, MaxRest: 2 * time.Second, Clock: clk,
		Sleep: func(_ context.Context, d time.Duration) error { rests = append(rests, d); return nil }}
	for _, took := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		require.NoError(t, p.Step(context.Background(), func() error { clk.Advance(took); return nil }))
	}
	require.Equal(t, []time.Duration{300 * time.Millisecond, 900 * time.Millisecond, 2 * time.Second}, rests)

	boom := errors.New("boom")
	require.ErrorIs(t, p.Step(context.Background(), func() error { clk.Advance(time.Second); return boom }), boom)
	require.Len(t, rests, 3, "no rest after a failed step")

	for _, share := range []float64{0, 1} {
		require.Zero(t, pace.Pacer{Share: share}.Rest(time.Second), "share %v rests nothing", share)
	}
	require.Equal(t, time.Second, pace.Pacer{Share: 0.5}.Rest(time.Second))
}

// TestPacer_R_M5_RestEndsWithTheContext: a stop during the rest ends the
// step with the context's cause.
func TestPacer_R_M5_RestEndsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("shutting down")
	cancel(stop)
	clk := clock.NewFake(time.Unix(0, 0))
	err := pace.Pacer{Share: 0.1, Clock: clk}.Step(ctx, func() error { clk.Advance(time.Hour); return nil })
	require.ErrorIs(t, err, stop)
}

// TestPacer_R_M5_GivesWayWhileTheLiveWorkIsBehind: after its rest a step
// waits, a poll at a time, while the live work is behind, and goes on as
// soon as it is not; never longer than MaxYield for one step, and not at
// all when the check fails.
func TestPacer_R_M5_GivesWayWhileTheLiveWorkIsBehind(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 3, 3, 30, 0, 0, time.UTC))
	var sleeps []time.Duration
	behind := 0
	p := pace.Pacer{Share: 0.5, Clock: clk, YieldPoll: 100 * time.Millisecond, MaxYield: 350 * time.Millisecond,
		Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil },
		Behind: func(context.Context) (bool, error) {
			if behind > 0 {
				behind--
				return true, nil
			}
			return false, nil
		}}
	step := func() { clk.Advance(40 * time.Millisecond) }

	behind = 2
	require.NoError(t, p.Step(context.Background(), func() error { step(); return nil }))
	require.Equal(t, []time.Duration{40 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, sleeps,
		"the rest, then two polls while behind")

	sleeps, behind = nil, 100
	require.NoError(t, p.Step(context.Background(), func() error { step(); return nil }))
	require.Equal(t, []time.Duration{40 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond}, sleeps,
		"at most MaxYield of waiting for one step")

	sleeps = nil
	p.Behind = func(context.Context) (bool, error) { return true, errors.New("unreadable") }
	require.NoError(t, p.Step(context.Background(), func() error { step(); return nil }))
	require.Equal(t, []time.Duration{40 * time.Millisecond}, sleeps, "a failing check does not stall the job")
}
