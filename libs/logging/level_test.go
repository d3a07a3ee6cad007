package logging_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
)

// TestLevel_R_N2_TheLoggerFollowsTheLevelAtRunTime: a debug line is not
// written at info and is once the level is set to debug, by the logger,
// by loggers derived from it and by the rate-limited client loggers built
// on its handler; setting warn silences info again.
func TestLevel_R_N2_TheLoggerFollowsTheLevelAtRunTime(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	level := logging.NewLevel(logging.Config{Level: "info"}.SlogLevel(), clk)
	log := logging.NewLeveled(&buf, "text", level)
	derived := log.With("component", "processor")
	client := slog.New(logging.RateLimited(log.Handler(), 3, time.Second, clk)).With("component", "kafka-client")

	log.Debug("before")
	derived.Debug("before")
	client.Debug("before")
	require.Empty(t, buf.String(), "no debug line at info")

	level.Set(slog.LevelDebug)
	log.Debug("after")
	derived.Debug("after")
	client.Debug("after")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, "%q", lines)
	for _, l := range lines {
		require.Contains(t, l, "level=DEBUG msg=after")
	}
	require.Contains(t, lines[2], "component=kafka-client")

	buf.Reset()
	level.Set(slog.LevelWarn)
	log.Info("hidden")
	client.Info("hidden")
	log.Warn("shown")
	require.Equal(t, 1, strings.Count(buf.String(), "\n"), "%q", buf.String())
	require.Contains(t, buf.String(), "msg=shown")
}

// TestLevel_R_N2_SetForRevertsOnTheClock: a level set for ten minutes holds
// for ten minutes of the injected clock, then the level set before is in
// force again; Set during the while ends it at once.
func TestLevel_R_N2_SetForRevertsOnTheClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	level := logging.NewLevel(slog.LevelInfo, clk)

	until := level.SetFor(slog.LevelDebug, 10*time.Minute)
	require.Equal(t, start.Add(10*time.Minute), until)
	require.Equal(t, slog.LevelDebug, level.Level())
	now, gotUntil, then := level.State()
	require.Equal(t, slog.LevelDebug, now)
	require.Equal(t, until, gotUntil)
	require.Equal(t, slog.LevelInfo, then)

	clk.Advance(10*time.Minute - time.Nanosecond)
	require.Equal(t, slog.LevelDebug, level.Level(), "still within the ten minutes")
	clk.Advance(time.Nanosecond)
	require.Equal(t, slog.LevelInfo, level.Level(), "reverted after ten minutes")
	now, gotUntil, _ = level.State()
	require.Equal(t, slog.LevelInfo, now)
	require.True(t, gotUntil.IsZero())

	level.SetFor(slog.LevelDebug, time.Hour)
	level.Set(slog.LevelWarn)
	require.Equal(t, slog.LevelWarn, level.Level(), "Set ends a level set for a while")
	clk.Advance(2 * time.Hour)
	require.Equal(t, slog.LevelWarn, level.Level())
}

// TestParseLevel_R_N2 accepts the four level names an operator types, in
// any case, and names the choices otherwise.
func TestParseLevel_R_N2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want slog.Level
	}{
		{"debug", slog.LevelDebug}, {"INFO", slog.LevelInfo}, {" warn\n", slog.LevelWarn}, {"Error", slog.LevelError},
	} {
		got, err := logging.ParseLevel(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.Equal(t, strings.ToLower(strings.TrimSpace(tc.in)), logging.LevelName(got))
	}
	for _, bad := range []string{"", "verbose", "info+2", "warning"} {
		_, err := logging.ParseLevel(bad)
		require.ErrorContains(t, err, "want debug, info, warn or error", bad)
	}
}
