package telemetry_test

import (
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/telemetry"
)

// otelDefaultBuckets are the SDK's default boundaries, meant for
// milliseconds.
var otelDefaultBuckets = []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}

func newTelemetry(t *testing.T) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New(telemetry.Build{Version: "1.2.3", Commit: "abc123", GoVersion: "go1.26.8", Platform: "linux/amd64"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Provider.Shutdown(context.Background()) })
	return tel
}

func gather(t *testing.T, tel *telemetry.Telemetry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := tel.Gatherer().Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func bounds(h *dto.Histogram) []float64 {
	var out []float64
	for _, b := range h.GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	return out
}

// TestTelemetry_R_I4_SecondsHistogramsGetFittedBuckets: every histogram in
// seconds — by unit or by name, even one that asks for other boundaries —
// is exported with the boundaries of its kind, never the SDK's
// millisecond defaults, and a 3 ms execution lands in a bucket below 5 ms.
func TestTelemetry_R_I4_SecondsHistogramsGetFittedBuckets(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	m := tel.Meter("test")
	ctx := context.Background()
	exec, err := m.Float64Histogram("msgx_test_execution_seconds", metric.WithUnit("s"))
	require.NoError(t, err)
	rpc, err := m.Float64Histogram("msgx_test_rpc_duration", metric.WithUnit("s"))
	require.NoError(t, err)
	stage, err := m.Float64Histogram("msgx_test_stage_latency_seconds")
	require.NoError(t, err)
	asked, err := m.Float64Histogram("msgx_test_recovery_duration_seconds", metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(5, 10, 25))
	require.NoError(t, err)
	other, err := m.Int64Histogram("msgx_test_batch_size", metric.WithExplicitBucketBoundaries(1, 10, 100))
	require.NoError(t, err)
	exec.Record(ctx, 0.003)
	rpc.Record(ctx, 0.02)
	stage.Record(ctx, 1.5)
	asked.Record(ctx, 42)
	other.Record(ctx, 7)

	fams := gather(t, tel)
	want := map[string][]float64{
		"msgx_test_execution_seconds":         telemetry.ExecutionBuckets,
		"msgx_test_rpc_duration_seconds":      telemetry.CallBuckets,
		"msgx_test_stage_latency_seconds":     telemetry.LatencyBuckets,
		"msgx_test_recovery_duration_seconds": telemetry.LongBuckets,
	}
	for name, b := range want {
		f, ok := fams[name]
		require.True(t, ok, "%s not exported; have %v", name, keys(fams))
		require.Equal(t, dto.MetricType_HISTOGRAM, f.GetType())
		got := bounds(f.GetMetric()[0].GetHistogram())
		require.Equal(t, b, got, name)
		require.NotEqual(t, otelDefaultBuckets, got, name)
	}
	// The 3 ms execution is counted in the 3 ms bucket, not only in "5".
	h := fams["msgx_test_execution_seconds"].GetMetric()[0].GetHistogram()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == 0.002 {
			require.Zero(t, b.GetCumulativeCount())
		}
		if b.GetUpperBound() == 0.003 {
			require.Equal(t, uint64(1), b.GetCumulativeCount())
		}
	}
	// A histogram that is not in seconds keeps its own boundaries.
	require.Equal(t, []float64{1, 10, 100}, bounds(fams["msgx_test_batch_size"].GetMetric()[0].GetHistogram()))
}

// TestTelemetry_R_I4_RuntimeProcessAndBuildInfo: /metrics carries the Go
// runtime and process metrics and msgx_build_info with the build's labels.
func TestTelemetry_R_I4_RuntimeProcessAndBuildInfo(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	text := string(body)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds", "go_gc_gomemlimit_bytes",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"} {
		require.Contains(t, text, "\n"+name, "%s missing", name)
	}
	require.Contains(t, text, `msgx_build_info{commit="abc123",go_version="go1.26.8",platform="linux/amd64",version="1.2.3"} 1`)
}

// TestBucketsFor_R_I4_KindsByName: the boundaries are chosen by the kind of
// duration a name says it measures, and every set is strictly increasing.
func TestBucketsFor_R_I4_KindsByName(t *testing.T) {
	t.Parallel()
	require.Equal(t, telemetry.ExecutionBuckets, telemetry.BucketsFor("msgx_processor_execution_seconds"))
	require.Equal(t, telemetry.LatencyBuckets, telemetry.BucketsFor("msgx_processor_stage_latency_seconds"))
	require.Equal(t, telemetry.LongBuckets, telemetry.BucketsFor("msgx_projector_recovery_duration_seconds"))
	require.Equal(t, telemetry.CallBuckets, telemetry.BucketsFor("msgx_control_rpc_duration_seconds"))
	require.Equal(t, telemetry.CallBuckets, telemetry.BucketsFor("msgx_http_request_duration_seconds"))
	for _, b := range [][]float64{telemetry.ExecutionBuckets, telemetry.LatencyBuckets, telemetry.CallBuckets, telemetry.LongBuckets} {
		require.True(t, slices.IsSorted(b))
		require.Len(t, slices.Compact(slices.Clone(b)), len(b))
	}
	// BucketsFor hands out copies: a caller cannot change the shared sets.
	b := telemetry.BucketsFor("msgx_processor_execution_seconds")
	b[0] = 99
	require.NotEqual(t, 99.0, telemetry.ExecutionBuckets[0])
}

func keys(m map[string]*dto.MetricFamily) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
