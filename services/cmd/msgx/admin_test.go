package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/pgtest"
)

// TestMode_R_N2_AdminPortLoopbackOnlyInProduction: production mode refuses
// an admin port beyond loopback with one refusal naming admin.addr and
// the way in (kubectl port-forward); loopback passes, and development mode
// accepts every interface.
func TestMode_R_N2_AdminPortLoopbackOnlyInProduction(t *testing.T) {
	t.Parallel()
	base := append(credentials(t), "-target=control")
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "[::]:6060", "10.1.2.3:6060"} {
		err := validate(t, append(append([]string{}, base...), "-admin.addr="+addr)...)
		got := refusals(err)
		require.Len(t, got, 1, "one refusal, naming the flag: %q", got)
		require.Contains(t, got[0], "admin.addr: refused outside development mode")
		require.Contains(t, got[0], "kubectl port-forward")
		require.NoError(t, validate(t, append(append([]string{}, base...), "-admin.addr="+addr, "-mode=development")...),
			"development mode accepts %s", addr)
	}
	for _, addr := range []string{"127.0.0.1:6060", "localhost:6060", "[::1]:6060"} {
		require.NoError(t, validate(t, append(append([]string{}, base...), "-admin.addr="+addr)...), addr)
	}
	require.NoError(t, validate(t, base...), "off (the default) passes")
	require.ErrorContains(t, validate(t, "-mode=development", "-target=migrate", "-admin.addr=6060"), `admin.addr "6060": want host:port`)
}

// logBuffer is the process's log, read by the test while it runs.
type logBuffer struct{ testutil.LogBuffer }

// find returns the JSON lines whose msg is msg and whose attributes
// include every pair of attrs.
func (b *logBuffer) find(t *testing.T, msg string, attrs ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
lines:
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil || m["msg"] != msg {
			continue
		}
		for i := 0; i+1 < len(attrs); i += 2 {
			if m[attrs[i]] != attrs[i+1] {
				continue lines
			}
		}
		out = append(out, m)
	}
	return out
}

// await waits for a line whose msg is msg with attrs and returns it.
func (b *logBuffer) await(t *testing.T, msg string, attrs ...string) map[string]any {
	t.Helper()
	var got []map[string]any
	require.Eventually(t, func() bool {
		got = b.find(t, msg, attrs...)
		return len(got) > 0
	}, 30*time.Second, 10*time.Millisecond, "no log line %q %v", msg, attrs)
	return got[0]
}

// runningApp is an all-in-process msgx of the control target, on ports
// the system chose, logging JSON to log.
type runningApp struct {
	log    *logBuffer
	http   string // base URL of http.addr
	grpc   string // control plane address
	cancel context.CancelFunc
	done   chan error
}

func startApp(t *testing.T, pgURL string, extra ...string) *runningApp {
	t.Helper()
	args := append([]string{
		"-mode=development", "-target=control", "-postgres.url=" + pgURL,
		"-control.grpc-addr=127.0.0.1:0", "-control.insecure-no-auth",
		"-http.addr=127.0.0.1:0", "-log.format=json", "-log.level=info",
	}, extra...)
	cfg, _, err := loadConfig(args)
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	a := &runningApp{log: &logBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { a.done <- runApp(ctx, cfg, a.log) }()
	t.Cleanup(a.stop(t))
	a.http = "http://" + a.log.await(t, "http listening", "server", "http")["addr"].(string)
	a.grpc = a.log.await(t, "grpc listening")["addr"].(string)
	return a
}

// stop returns the cleanup that stops the app and checks it stopped cleanly.
func (a *runningApp) stop(t *testing.T) func() {
	return func() {
		a.cancel()
		select {
		case err := <-a.done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("msgx did not stop within 30 s")
		}
		http.DefaultClient.CloseIdleConnections()
	}
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// healthCheck calls the control plane's gRPC health service, which the
// control plane logs at debug level ("control-plane call").
func healthCheck(t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
}

// TestRun_R_N2_AdminPortOffByDefault: a process started without
// admin.addr opens no admin listener, and its public listener serves
// neither pprof nor the log level.
func TestRun_R_N2_AdminPortOffByDefault(t *testing.T) {
	t.Parallel()
	a := startApp(t, pgtest.NewDatabase(t))
	a.log.await(t, "starting")
	require.Empty(t, a.log.find(t, "http listening", "server", "admin"), "no admin listener by default")
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/loglevel"} {
		code, _ := httpDo(t, http.MethodGet, a.http+path, "")
		require.Equal(t, http.StatusNotFound, code, "%s on the public listener", path)
	}
}

// TestRun_R_N2_AdminPortServesPprofAndTheProcessLogLevel: with admin.addr
// the process serves pprof there (a heap profile comes back) and not on
// the public listener; PUT /debug/loglevel debug makes the process's own
// debug lines appear (the control plane's per-call line), which did not
// before, and the change is logged at INFO.
func TestRun_R_N2_AdminPortServesPprofAndTheProcessLogLevel(t *testing.T) {
	t.Parallel()
	a := startApp(t, pgtest.NewDatabase(t), "-admin.addr=127.0.0.1:0")
	admin := "http://" + a.log.await(t, "http listening", "server", "admin")["addr"].(string)
	require.NotEqual(t, a.http, admin)

	code, body := httpDo(t, http.MethodGet, admin+"/debug/pprof/", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "heap")
	code, body = httpDo(t, http.MethodGet, admin+"/debug/pprof/heap", "")
	require.Equal(t, http.StatusOK, code)
	zr, err := gzip.NewReader(strings.NewReader(body))
	require.NoError(t, err, "a heap profile is gzipped protobuf")
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(raw), "inuse_space")
	code, _ = httpDo(t, http.MethodGet, a.http+"/debug/pprof/", "")
	require.Equal(t, http.StatusNotFound, code, "pprof is never on the public listener")

	healthCheck(t, a.grpc)
	require.Empty(t, a.log.find(t, "control-plane call"), "no debug line at info")

	code, body = httpDo(t, http.MethodPut, admin+"/debug/loglevel", "debug")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "debug\n", body)
	changed := a.log.await(t, "log level changed", "from", "info", "to", "debug")
	require.Equal(t, "INFO", changed["level"])
	require.Equal(t, "admin", changed["component"])

	healthCheck(t, a.grpc)
	call := a.log.await(t, "control-plane call")
	require.Equal(t, "DEBUG", call["level"])
	require.Equal(t, "/grpc.health.v1.Health/Check", call["method"])

	code, body = httpDo(t, http.MethodPut, admin+"/debug/loglevel", "loud")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, `log level "loud": want debug, info, warn or error`)
}
