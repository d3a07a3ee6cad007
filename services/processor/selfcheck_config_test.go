package processor_test

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/processor"
)

// parse registers the processor's flags and parses args.
func parse(t *testing.T, args ...string) processor.Config {
	t.Helper()
	var c processor.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags("processor.", fs)
	require.NoError(t, fs.Parse(args))
	return c
}

// TestConfig_R_H4_SelfCheckFlagsDefaultsAndValidation: the self-check runs
// every 30 s with a one-minute grace by default; both are flags, and a
// non-positive interval or a grace under a second is refused.
func TestConfig_R_H4_SelfCheckFlagsDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	c := parse(t)
	require.Equal(t, 30*time.Second, c.Pipeline.SelfCheckInterval)
	require.Equal(t, time.Minute, c.Pipeline.SelfCheckGrace)
	require.NoError(t, c.Validate())

	c = parse(t, "-processor.pipeline.self-check-interval=5m", "-processor.pipeline.self-check-grace=10m")
	require.Equal(t, 5*time.Minute, c.Pipeline.SelfCheckInterval)
	require.Equal(t, 10*time.Minute, c.Pipeline.SelfCheckGrace)
	require.NoError(t, c.Validate())

	c.Pipeline.SelfCheckInterval = 0
	c.Pipeline.SelfCheckGrace = time.Millisecond
	err := c.Validate()
	require.ErrorContains(t, err, "pipeline.self-check-interval 0s: must be positive")
	require.ErrorContains(t, err, "pipeline.self-check-grace 1ms: must be at least 1s")
}

// TestConfig_R_L8_StallLimitFlag: a Kafka loop refused by the brokers may
// stay stalled one minute by default before the process exits; the flag
// moves it, and a limit under a second is refused naming the flag.
func TestConfig_R_L8_StallLimitFlag(t *testing.T) {
	t.Parallel()
	c := parse(t)
	require.Equal(t, time.Minute, c.Pipeline.StallLimit)
	require.NoError(t, c.Validate())
	c = parse(t, "-processor.pipeline.stall-limit=5m")
	require.Equal(t, 5*time.Minute, c.Pipeline.StallLimit)
	require.NoError(t, c.Validate())
	c.Pipeline.StallLimit = 0
	require.ErrorContains(t, c.Validate(), "pipeline.stall-limit: 0s must be at least 1s (default 1m0s)")
}
