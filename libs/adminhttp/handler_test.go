package adminhttp_test

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/adminhttp"
	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
	"msgexchange/libs/testutil"
)

// withMsg returns the lines whose msg is msg.
func withMsg(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

type testBundle struct {
	clk   *clock.Fake
	level *logging.Level
	log   *slog.Logger
	out   *testutil.LogBuffer
	srv   *httptest.Server
}

// setup serves the admin handler for a JSON logger at info whose output the
// test reads.
func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{clk: clock.NewFake(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)), out: &testutil.LogBuffer{}}
	b.level = logging.NewLevel(slog.LevelInfo, b.clk)
	b.log = logging.NewLeveled(b.out, "json", b.level).With("service", "msgx")
	b.srv = httptest.NewServer(adminhttp.Handler(b.level, b.log))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *testBundle) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(got)
}

// TestAdmin_R_N2_PprofAnswersAndReturnsAHeapProfile: the pprof index lists
// the profiles, the heap profile is a gzipped profile of the heap's sample
// types, and the other pprof routes answer.
func TestAdmin_R_N2_PprofAnswersAndReturnsAHeapProfile(t *testing.T) {
	t.Parallel()
	b := setup(t)

	code, body := b.do(t, http.MethodGet, "/debug/pprof/", "")
	require.Equal(t, http.StatusOK, code)
	for _, p := range []string{"heap", "goroutine", "allocs", "profile", "trace", "cmdline"} {
		require.Contains(t, body, p, "the index lists %s", p)
	}

	code, body = b.do(t, http.MethodGet, "/debug/pprof/heap", "")
	require.Equal(t, http.StatusOK, code)
	zr, err := gzip.NewReader(strings.NewReader(body))
	require.NoError(t, err, "a heap profile is gzipped protobuf")
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(raw), "inuse_space", "the profile's sample types are the heap's")

	code, body = b.do(t, http.MethodGet, "/debug/pprof/goroutine?debug=1", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine profile:")
	code, _ = b.do(t, http.MethodGet, "/debug/pprof/cmdline", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = b.do(t, http.MethodPost, "/debug/pprof/symbol", "")
	require.Equal(t, http.StatusOK, code)
	code, body = b.do(t, http.MethodGet, "/debug/pprof/profile?seconds=1", "")
	require.Equal(t, http.StatusOK, code, body)
	_, err = gzip.NewReader(strings.NewReader(body))
	require.NoError(t, err, "a CPU profile is gzipped protobuf")
	code, body = b.do(t, http.MethodGet, "/debug/pprof/trace?seconds=0.1", "")
	require.Equal(t, http.StatusOK, code, body)
	require.True(t, strings.HasPrefix(body, "go "), "an execution trace starts with its header")
}

// TestAdmin_R_N2_PutDebugMakesDebugLinesAppear: at info a debug line is
// not written; after PUT /debug/loglevel debug the same line is, GET says
// debug, and the change is logged at INFO with the old and new level.
func TestAdmin_R_N2_PutDebugMakesDebugLinesAppear(t *testing.T) {
	t.Parallel()
	b := setup(t)

	code, body := b.do(t, http.MethodGet, "/debug/loglevel", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "info\n", body)
	b.log.Debug("probe")
	require.Empty(t, withMsg(b.out.JSONLines(t), "probe"), "no debug line at info")

	code, body = b.do(t, http.MethodPut, "/debug/loglevel", "debug\n")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "debug\n", body)
	b.log.Debug("probe")
	lines := b.out.JSONLines(t)
	probes := withMsg(lines, "probe")
	require.Len(t, probes, 1, "the debug line is written at debug")
	require.Equal(t, "DEBUG", probes[0]["level"])

	changes := withMsg(lines, "log level changed")
	require.Len(t, changes, 1)
	require.Equal(t, "INFO", changes[0]["level"])
	require.Equal(t, "info", changes[0]["from"])
	require.Equal(t, "debug", changes[0]["to"])

	_, body = b.do(t, http.MethodGet, "/debug/loglevel", "")
	require.Equal(t, "debug\n", body)
}

// TestAdmin_R_N2_SilencingInfoIsStillLogged: setting error hides info
// lines, but not the INFO line recording that change.
func TestAdmin_R_N2_SilencingInfoIsStillLogged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, _ := b.do(t, http.MethodPut, "/debug/loglevel", "error")
	require.Equal(t, http.StatusOK, code)
	b.log.Info("probe")
	lines := b.out.JSONLines(t)
	require.Empty(t, withMsg(lines, "probe"))
	changes := withMsg(lines, "log level changed")
	require.Len(t, changes, 1)
	require.Equal(t, "info", changes[0]["from"])
	require.Equal(t, "error", changes[0]["to"])
}

// TestAdmin_R_N2_BadLevelIs400: a level or duration the endpoint cannot
// read is answered 400 saying what it wants, and the level is unchanged.
func TestAdmin_R_N2_BadLevelIs400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"UnknownLevel", "/debug/loglevel", "verbose", `log level "verbose": want debug, info, warn or error`},
		{"Empty", "/debug/loglevel", "", "want debug, info, warn or error"},
		{"TooLong", "/debug/loglevel", strings.Repeat("d", 100), "send one of debug, info, warn or error"},
		{"BadDuration", "/debug/loglevel?for=soon", "debug", `for "soon": want a positive duration, e.g. 10m or 1h`},
		{"NegativeDuration", "/debug/loglevel?for=-5m", "debug", `for "-5m": want a positive duration`},
	} {
		code, body := b.do(t, http.MethodPut, tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, code, tc.name)
		require.Contains(t, body, tc.want, tc.name)
	}
	_, body := b.do(t, http.MethodGet, "/debug/loglevel", "")
	require.Equal(t, "info\n", body, "a refused change changes nothing")
	require.Empty(t, withMsg(b.out.JSONLines(t), "log level changed"))
	code, _ := b.do(t, http.MethodPost, "/debug/loglevel", "debug")
	require.Equal(t, http.StatusMethodNotAllowed, code)
}

// TestAdmin_R_N2_LevelForAWhileReverts: PUT ?for=10m sets debug for ten
// minutes of the injected clock, GET says until when and what follows,
// the change line names both, and after ten minutes info is back.
func TestAdmin_R_N2_LevelForAWhileReverts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, body := b.do(t, http.MethodPut, "/debug/loglevel?for=10m", "debug")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "debug until 2026-01-01T10:10:00Z, then info\n", body)
	changes := withMsg(b.out.JSONLines(t), "log level changed")
	require.Len(t, changes, 1)
	require.Equal(t, "2026-01-01T10:10:00Z", changes[0]["until"])
	require.Equal(t, "info", changes[0]["then"])

	b.log.Debug("probe")
	require.Len(t, withMsg(b.out.JSONLines(t), "probe"), 1)

	b.clk.Advance(10 * time.Minute)
	_, body = b.do(t, http.MethodGet, "/debug/loglevel", "")
	require.Equal(t, "info\n", body)
	b.log.Debug("probe")
	require.Len(t, withMsg(b.out.JSONLines(t), "probe"), 1, "no debug line after the ten minutes")
}
