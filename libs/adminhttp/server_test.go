package adminhttp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/adminhttp"
	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
	"msgexchange/libs/testutil"
)

// TestServer_R_N2_ServesOnItsOwnAddressAsALifecycleService: with an
// address the admin server is a lifecycle service that listens once
// Running, serves pprof and the level there, logs as component admin, and
// stops.
func TestServer_R_N2_ServesOnItsOwnAddressAsALifecycleService(t *testing.T) {
	t.Parallel()
	out := &testutil.LogBuffer{}
	level := logging.NewLevel(slog.LevelInfo, clock.Real{})
	log := logging.NewLeveled(out, "json", level)
	svc := adminhttp.New(adminhttp.Config{Addr: "127.0.0.1:0"}, level, log)
	require.NotNil(t, svc)
	require.Equal(t, adminhttp.ServiceName, svc.Name())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, svc.Start(ctx))
	require.NoError(t, svc.AwaitRunning(ctx))
	defer func() {
		svc.StopAsync()
		require.NoError(t, svc.AwaitTerminated(ctx))
	}()
	listening := withMsg(out.JSONLines(t), "http listening")
	require.Len(t, listening, 1)
	require.Equal(t, "admin", listening[0]["server"])
	require.Equal(t, "admin", listening[0]["component"])
	base := "http://" + listening[0]["addr"].(string)

	get := func(path string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, _ := get("/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	code, body := get("/debug/loglevel")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "info\n", body)
	http.DefaultClient.CloseIdleConnections()
}
