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

// TestRateLimited_AFewLinesPerCausePerIntervalWithCounts: a tight loop of
// one failing cause writes burst lines per interval, the next line carries
// how many were dropped, and another cause is limited on its own.
func TestRateLimited_AFewLinesPerCausePerIntervalWithCounts(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	log := slog.New(logging.RateLimited(slog.NewTextHandler(&buf, nil), 3, time.Second, clk)).With("component", "kafka-test")
	for range 50000 {
		log.Warn("produce partition load error, bumping error count on first stored batch", "broker", "1")
	}
	log.Info("another cause")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4)
	require.Contains(t, lines[3], "another cause")
	buf.Reset()

	clk.Advance(time.Second)
	log.Warn("produce partition load error, bumping error count on first stored batch", "broker", "1")
	require.Contains(t, buf.String(), "suppressed=49997")
	require.Contains(t, buf.String(), "component=kafka-test")
}
