package processor_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/services/processor"
)

// TestConfig_R_B5_RetryScheduleDefaultsAndJitter: by default a failed head
// waits 1, 2, 4, 8, 16 s doubling to the 60 s cap (the R-B5 table), with
// libs/backoff's default jitter; backoff-min and backoff-cap move it, and
// a minimum above the cap or a non-positive value is refused.
func TestConfig_R_B5_RetryScheduleDefaultsAndJitter(t *testing.T) {
	t.Parallel()
	c := parse(t)
	require.NoError(t, c.Validate())
	s, deprecation, err := c.Pipeline.RetrySchedule()
	require.NoError(t, err)
	require.Empty(t, deprecation)
	require.Equal(t, backoff.Schedule{First: time.Second, Max: time.Minute, Jitter: backoff.DefaultJitter}, s)
	s.Rand = func() float64 { return 0 }
	var waits []time.Duration
	for n := 1; n <= 7; n++ {
		waits = append(waits, s.Delay(n))
	}
	sec := time.Second
	require.Equal(t, []time.Duration{sec, 2 * sec, 4 * sec, 8 * sec, 16 * sec, 32 * sec, 60 * sec}, waits)

	c = parse(t, "-processor.pipeline.backoff-min=200ms", "-processor.pipeline.backoff-cap=5s")
	s, _, err = c.Pipeline.RetrySchedule()
	require.NoError(t, err)
	require.Equal(t, 200*time.Millisecond, s.First)
	require.Equal(t, 5*time.Second, s.Max)

	c = parse(t, "-processor.pipeline.backoff-min=2m")
	require.ErrorContains(t, c.Validate(), "pipeline.backoff-min 2m0s, pipeline.backoff-cap 1m0s: need 0 < min <= cap")
	c = parse(t, "-processor.pipeline.backoff-cap=0s")
	require.ErrorContains(t, c.Validate(), "need 0 < min <= cap")
}

// TestConfig_R_B5_DeprecatedBackoffListMapsToMinAndCap: the old
// per-attempt list is still read for one release: its first value becomes
// backoff-min and its last, bounded by backoff-cap, the cap; the
// deprecation names the flags to set instead. The old default list gives
// the old waits. A list that does not parse is refused naming the flag.
func TestConfig_R_B5_DeprecatedBackoffListMapsToMinAndCap(t *testing.T) {
	t.Parallel()
	c := parse(t, "-processor.pipeline.backoff=1s,2s,4s,8s,16s")
	require.NoError(t, c.Validate())
	s, deprecation, err := c.Pipeline.RetrySchedule()
	require.NoError(t, err)
	require.Equal(t, time.Second, s.First)
	require.Equal(t, 16*time.Second, s.Max)
	require.Equal(t, backoff.DefaultJitter, s.Jitter, "the old list gets the jitter too")
	s.Rand = func() float64 { return 0 }
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second} {
		require.Equal(t, want, s.Delay(n+1), "attempt %d as before", n+1)
	}
	require.Contains(t, deprecation, "pipeline.backoff is deprecated")
	require.Contains(t, deprecation, "pipeline.backoff-min=1s pipeline.backoff-cap=16s")

	c = parse(t, "-processor.pipeline.backoff=30s,10m", "-processor.pipeline.backoff-cap=1m")
	s, deprecation, err = c.Pipeline.RetrySchedule()
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, s.First)
	require.Equal(t, time.Minute, s.Max, "bounded by backoff-cap as the list always was")
	require.Contains(t, deprecation, "pipeline.backoff-min=30s pipeline.backoff-cap=1m0s")

	c = parse(t, "-processor.pipeline.backoff=1s,soon")
	require.ErrorContains(t, c.Validate(), `pipeline.backoff (deprecated) "1s,soon"`)
}

// TestNew_R_B5_DeprecatedBackoffListIsLogged: a processor started with the
// old list says once, at WARN, which flags replace it; one started with
// the new flags says nothing about it.
func TestNew_R_B5_DeprecatedBackoffListIsLogged(t *testing.T) {
	t.Parallel()
	// Nothing connects while the processor is built.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	start := func(args ...string) string {
		var out bytes.Buffer
		deps := processor.Deps{Logger: slog.New(slog.NewTextHandler(&out, nil)), Clock: clock.Real{},
			Meter: noop.NewMeterProvider().Meter("t"), Postgres: pool}
		_, err := processor.New(parse(t, args...), deps)
		require.NoError(t, err)
		return out.String()
	}
	logged := start("-processor.pipeline.backoff=100ms,200ms")
	require.Contains(t, logged, "level=WARN")
	require.Contains(t, logged, "pipeline.backoff-min=100ms pipeline.backoff-cap=200ms")
	require.NotContains(t, start("-processor.pipeline.backoff-min=100ms"), "deprecated")
}
