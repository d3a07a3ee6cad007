package pipeline

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// gaugeValues collects every gauge point by name (and target attribute).
func gaugeValues(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[float64])
			if !ok {
				continue
			}
			for _, p := range g.DataPoints {
				name := m.Name
				if v, ok := p.Attributes.Value("target"); ok {
					name += "{" + v.AsString() + "}"
				}
				out[name] = p.Value
			}
		}
	}
	return out
}

// TestGauges_R_F4 checks the backlog gauges against a crafted pipeline, and
// that they read NaN — never 0 — when PostgreSQL cannot be read.
func TestGauges_R_F4(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h := newHarness(t, func(o *Options) { o.Meter = mp.Meter("test") })

	empty := gaugeValues(t, reader)
	require.Equal(t, 0.0, empty["msgx_backlog_unfinished"])
	require.Equal(t, 0.0, empty["msgx_oldest_unprocessed_seconds"], "an empty backlog has no age")

	now := h.clk.Now()
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset, received_at) VALUES
		(1, 'PENDING', 'x', 0, $1), (2, 'FAILED', 'x', 1, $2), (3, 'APPLIED', 'x', 2, $2)`, now.Add(-90*time.Second), now.Add(-10*time.Second))
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset, finished_at) VALUES (4, 'SUCCEEDED', 'x', 3, $1), (5, 'DEAD', 'x', 4, $2)`,
		now.Add(-30*time.Second), now.Add(-5*time.Second))
	h.exec(`INSERT INTO outbox (target, pkey, state) VALUES ('msg', '1', 'PENDING'), ('msg', '1', 'DEAD'), ('mailbox', '9', 'ABANDONED'), ('flight-state', '1', 'PENDING')`)

	v := gaugeValues(t, reader)
	require.Equal(t, 3.0, v["msgx_backlog_unfinished"])
	require.InDelta(t, 90, v["msgx_oldest_unprocessed_seconds"], 0.001)
	require.Equal(t, 2.0, v["msgx_unmarked_terminal"])
	require.InDelta(t, 30, v["msgx_oldest_unmarked_seconds"], 0.001)
	require.Equal(t, 1.0, v["msgx_backfill_abandoned"])
	require.Equal(t, 1.0, v["msgx_outbox_pending{msg}"])
	require.Equal(t, 1.0, v["msgx_outbox_dead{msg}"])
	require.Equal(t, 1.0, v["msgx_outbox_pending{flight-state}"])
	require.Equal(t, 0.0, v["msgx_outbox_pending{schd}"])

	h.pool.Close()
	down := gaugeValues(t, reader)
	require.True(t, math.IsNaN(down["msgx_backlog_unfinished"]), "unreadable gauges are NaN")
	require.True(t, math.IsNaN(down["msgx_outbox_dead{msg}"]))
}
