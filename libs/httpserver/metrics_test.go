package httpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/httpserver"
	"msgexchange/libs/telemetry"
)

// TestInstrument_R_I4_RequestsByRouteMethodAndCode: every request is
// counted and timed under the ServeMux pattern that served it, so two URLs
// of one route are one series, an unknown URL is "unmatched", and a method
// outside the standard ones is "other".
func TestInstrument_R_I4_RequestsByRouteMethodAndCode(t *testing.T) {
	t.Parallel()
	tel, err := telemetry.New(telemetry.Build{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Provider.Shutdown(context.Background()) })
	mux := http.NewServeMux()
	mux.HandleFunc("GET /flights/{flid}", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
	mux.HandleFunc("/down", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	h, err := httpserver.Instrument(mux, tel.Meter("http"))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method, path string) int {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, 200, do("GET", "/flights/1"))
	require.Equal(t, 200, do("GET", "/flights/2"))
	require.Equal(t, 404, do("GET", "/nope"))
	require.Equal(t, 503, do("BREW", "/down"))

	fams, err := tel.Gatherer().Gather()
	require.NoError(t, err)
	counts := map[[3]string]float64{}
	var inFlight *float64
	var hist *dto.Histogram
	for _, f := range fams {
		switch f.GetName() {
		case "msgx_http_requests_total":
			for _, m := range f.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				counts[[3]string{l["route"], l["method"], l["code"]}] = m.GetCounter().GetValue()
			}
		case "msgx_http_requests_in_flight":
			v := f.GetMetric()[0].GetGauge().GetValue()
			inFlight = &v
		case "msgx_http_request_duration_seconds":
			hist = f.GetMetric()[0].GetHistogram()
		}
	}
	require.Equal(t, map[[3]string]float64{
		{"/flights/{flid}", "GET", "200"}: 2,
		{"unmatched", "GET", "404"}:       1,
		{"/down", "other", "503"}:         1,
	}, counts)
	require.NotNil(t, inFlight)
	require.Zero(t, *inFlight)
	require.NotNil(t, hist)
	require.Len(t, hist.GetBucket(), len(telemetry.CallBuckets))
}
