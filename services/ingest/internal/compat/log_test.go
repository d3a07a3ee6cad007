package compat_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clip"
	"msgexchange/libs/clock"
	"msgexchange/libs/testutil"
	"msgexchange/services/ingest/internal/compat"
	"msgexchange/services/ingest/internal/ingesttest"
)

// lockedBuffer collects log output from the handler.
type lockedBuffer struct{ testutil.LogBuffer }

func (b *lockedBuffer) lines() []string {
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

// failingInserter fails every insert with an error quoting what it was
// given, as a driver error may.
type failingInserter struct{}

func (failingInserter) Insert(_ context.Context, message string, _ time.Time, _ string) (int64, error) {
	return 0, errors.New("inserting " + message)
}

// R-H2: text taken from a request into a log line is cut to 2 KB, so a
// hostile request cannot write megabytes of log.
func TestCompat_R_H2_LogLinesQuoteAtMost2KB(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	h, err := compat.New(compat.Config{MaxBody: 10 << 20, ValidStatus: "VALID"}, failingInserter{},
		clock.NewFake(time.Date(2021, 1, 23, 5, 35, 7, 0, time.UTC)), nil, ingesttest.NewMetrics(t).Meter,
		slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)

	long := strings.Repeat("x", 1<<20)
	rec := post(h, "text/xml; charset="+long, strings.NewReader(sample))
	requireFailure(t, rec, http.StatusUnsupportedMediaType, "unsupported_charset")
	rec = post(h, "text/xml; "+long, strings.NewReader(sample))
	requireFailure(t, rec, http.StatusUnsupportedMediaType, "unsupported_media_type")
	rec = post(h, "text/xml", strings.NewReader(strings.Replace(sample, "AODB", long, 1)))
	requireFailure(t, rec, http.StatusServiceUnavailable, "mailbox_unavailable")

	lines := logs.lines()
	require.Len(t, lines, 3)
	for _, line := range lines {
		// The clipped text plus the record's own keys and values.
		require.LessOrEqual(t, len(line), clip.Max+512, "log line of %d bytes: %.200s", len(line), line)
		require.Contains(t, line, "bytes cut]")
	}
}
