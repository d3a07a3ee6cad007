package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTelemetry_R_N2_OpenMetricsScrapeCarriesTraceExemplars: a latency
// measured inside a sampled span is exported with an exemplar naming the
// span's trace ID when the scraper asks for OpenMetrics; the text format
// (which has no exemplars) is what a scraper gets without asking.
func TestTelemetry_R_N2_OpenMetricsScrapeCarriesTraceExemplars(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h, err := tel.Meter("test").Float64Histogram("msgx_test_duration_seconds", metric.WithUnit("s"))
	require.NoError(t, err)
	ctx, span := tp.Tracer("test").Start(context.Background(), "work")
	h.Record(ctx, 0.042)
	span.End()
	traceID := span.SpanContext().TraceID().String()

	srv := httptest.NewServer(tel.Handler())
	t.Cleanup(srv.Close)
	scrape := func(accept string) (string, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.Header.Get("Content-Type"), string(body)
	}

	ct, body := scrape("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	require.Contains(t, ct, "application/openmetrics-text")
	require.Regexp(t, `msgx_test_duration_seconds_bucket\{le="[0-9.]+"\} 1 # \{[^}]*trace_id="`+traceID+`"[^}]*\} 0\.042`, body)

	ct, body = scrape("")
	require.Contains(t, ct, "text/plain")
	require.Contains(t, body, "msgx_test_duration_seconds_bucket")
	require.NotContains(t, body, traceID, "the text format has no exemplars")
}
