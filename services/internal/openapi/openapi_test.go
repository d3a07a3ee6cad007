package openapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/httpserver"
	"msgexchange/libs/telemetry"
	"msgexchange/services/internal/openapi/openapitest"
)

// TestHTTPContract_R_N7_HealthAndMetricsMatchTheOpenAPIDocument: the
// endpoints every process serves — /healthz, /readyz ready and not ready,
// /metrics in the text format and in OpenMetrics — answer as the document
// says (the flight routes, the board and the compat entry are checked
// where they are served).
func TestHTTPContract_R_N7_HealthAndMetricsMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	v := openapitest.New(t)
	tel, err := telemetry.New(telemetry.Build{Version: "test"})
	require.NoError(t, err)
	var notReady error
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", tel.Handler())
	httpserver.Health(mux, func(context.Context) error { return notReady })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		path, accept string
		notReady     error
		code         int
	}{
		{path: "/healthz", code: http.StatusOK},
		{path: "/readyz", code: http.StatusOK},
		{path: "/readyz", notReady: errors.New("redis: connection refused"), code: http.StatusServiceUnavailable},
		{path: "/metrics", code: http.StatusOK},
		{path: "/metrics", accept: "application/openmetrics-text; version=1.0.0", code: http.StatusOK},
	} {
		notReady = tc.notReady
		req, err := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		require.NoError(t, err)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, tc.code, resp.StatusCode, "%s: %s", tc.path, body)
		v.Response(t, req, resp, body)
	}
}
