package pipeline

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

type metrics struct {
	registered metric.Int64Counter
	finished   metric.Int64Counter
	failed     metric.Int64Counter
	duration   metric.Float64Histogram
	acks       metric.Int64Counter
}

func newMetrics(m metric.Meter) (*metrics, error) {
	if m == nil {
		m = noop.NewMeterProvider().Meter("processor")
	}
	var out metrics
	var err error
	if out.registered, err = m.Int64Counter("msgx_processor_registered_total", metric.WithDescription("mailbox messages registered in proc_state")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.finished, err = m.Int64Counter("msgx_processor_finished_total", metric.WithDescription("messages that reached a state, by state")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.failed, err = m.Int64Counter("msgx_processor_failed_total", metric.WithDescription("failed executions, by error class")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.duration, err = m.Float64Histogram("msgx_processor_execution_seconds", metric.WithUnit("s"), metric.WithDescription("time to execute one message")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.acks, err = m.Int64Counter("msgx_processor_projection_acks_total", metric.WithDescription("projection acks applied")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	return &out, nil
}
