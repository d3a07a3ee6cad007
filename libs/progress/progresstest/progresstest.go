package progresstest

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// StalledSeconds collects reader and returns msgx_loop_stalled_seconds by
// loop: how long each loop has been stalled, 0 while it progresses, and no
// entry for a loop that is not exported.
func StalledSeconds(t testing.TB, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collecting the loop metrics: %v", err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[float64])
			if !ok || m.Name != "msgx_loop_stalled_seconds" {
				continue
			}
			for _, dp := range g.DataPoints {
				loop, _ := dp.Attributes.Value("loop")
				out[loop.AsString()] = dp.Value
			}
		}
	}
	return out
}
