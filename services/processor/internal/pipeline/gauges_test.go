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

// TestGauges_R_D4_R_I2_AbandonedBackfillLeavesUnmarked: a backfill
// abandoned because its mailbox row is missing is finished (backfilled_at
// set with outcome abandoned, as the dispatcher records it), so the
// unmarked gauges behind MsgxUnmarkedBacklogOld stop counting it while
// msgx_backfill_abandoned (MsgxBackfillAbandoned) counts it; once an
// operator acknowledges it, and once a DEAD row is discarded (both
// DISCARDED), neither the abandoned nor the dead-letter gauge counts it.
func TestGauges_R_D4_R_I2_AbandonedBackfillLeavesUnmarked(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h := newHarness(t, func(o *Options) { o.Meter = mp.Meter("test") })

	now := h.clk.Now()
	finished := now.Add(-2 * time.Hour)
	// 7 is still waiting for its marker; 8 was abandoned an hour ago; 9
	// gave up and is dead-lettered.
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset, finished_at) VALUES
		(7, 'SUCCEEDED', 'x', 7, $1), (8, 'SUCCEEDED', 'x', 8, $2), (9, 'DEAD', 'x', 9, $2)`, now.Add(-time.Minute), finished)
	h.exec(`UPDATE proc_state SET backfilled_at=$1, backfill_outcome='abandoned' WHERE msg_id=8`, now.Add(-time.Hour))
	h.exec(`INSERT INTO outbox (id, target, pkey, msg_id, state, outcome) VALUES
		(70, 'mailbox', '7', 7, 'PENDING', NULL), (80, 'mailbox', '8', 8, 'ABANDONED', 'row-missing'),
		(90, 'mailbox', '9', 9, 'DEAD', 'gave-up'), (91, 'coutmsgs', 'RQFD', NULL, 'DEAD', NULL)`)

	v := gaugeValues(t, reader)
	require.Equal(t, 2.0, v["msgx_unmarked_terminal"], "the abandoned backfill is finished; 7 and the dead marker of 9 are not")
	require.InDelta(t, 2*time.Hour.Seconds(), v["msgx_oldest_unmarked_seconds"], 0.001)
	require.Equal(t, 1.0, v["msgx_backfill_abandoned"])
	require.Equal(t, 1.0, v["msgx_outbox_dead{mailbox}"])
	require.Equal(t, 1.0, v["msgx_outbox_dead{coutmsgs}"])

	// Acknowledge 80, discard the dead rows (the marker of 9 finishes as
	// discarded), as the control plane records them.
	h.exec(`UPDATE outbox SET state='DISCARDED' WHERE id IN (80, 90, 91)`)
	h.exec(`UPDATE proc_state SET backfilled_at=$1, backfill_outcome='discarded' WHERE msg_id=9`, now)
	v = gaugeValues(t, reader)
	require.Equal(t, 1.0, v["msgx_unmarked_terminal"])
	require.InDelta(t, time.Minute.Seconds(), v["msgx_oldest_unmarked_seconds"], 0.001)
	require.Zero(t, v["msgx_backfill_abandoned"], "an acknowledged backfill leaves the abandoned count")
	require.Zero(t, v["msgx_outbox_dead{mailbox}"])
	require.Zero(t, v["msgx_outbox_dead{coutmsgs}"])
}
