package consumer

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// metrics are the consumer's instruments. Names follow
// <product>_<component>_<thing>_<unit>.
type metrics struct {
	meter        metric.Meter
	applied      metric.Int64Counter
	stale        metric.Int64Counter
	redisErrors  metric.Int64Counter
	invalid      metric.Int64Counter
	acks         metric.Int64Counter
	ackErrors    metric.Int64Counter
	commitErrors metric.Int64Counter
	lag          metric.Float64ObservableGauge
}

func newMetrics(meter metric.Meter) (*metrics, error) {
	m := &metrics{meter: meter}
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.applied = counter("msgx_projector_applied_total", "flight-state records written to Redis (newer than the stored version)")
	m.stale = counter("msgx_projector_stale_total", "flight-state records the version guard ignored (stored version already >= record version)")
	m.redisErrors = counter("msgx_projector_redis_errors_total", "failed attempts to write a batch to Redis; each is retried with backoff")
	m.invalid = counter("msgx_projector_invalid_records_total", "flight-state records skipped because they do not follow the record format")
	m.acks = counter("msgx_projector_acks_total", "projection acks produced to msgx.projection-acks")
	m.ackErrors = counter("msgx_projector_ack_errors_total", "failed attempts to produce a batch's projection acks; each is retried with backoff")
	m.commitErrors = counter("msgx_projector_commit_errors_total", "failed offset commits; the records are consumed again, harmlessly")
	lag, err := meter.Float64ObservableGauge("msgx_projector_lag_records",
		metric.WithDescription("records of msgx.flight-state not yet projected and committed by the projector group; NaN when unknown"))
	errs = append(errs, err)
	m.lag = lag
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("creating projector metrics: %w", err)
	}
	// Exported at zero from the start, so rates and alerts work from the
	// first scrape (R-I4).
	for _, c := range []metric.Int64Counter{m.applied, m.stale, m.redisErrors, m.invalid, m.acks, m.ackErrors, m.commitErrors} {
		c.Add(context.Background(), 0)
	}
	return m, nil
}

// registerLag reports read() as the lag gauge at every collection until
// the registration is unregistered.
func (m *metrics) registerLag(read func(ctx context.Context) float64) (metric.Registration, error) {
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		o.ObserveFloat64(m.lag, read(ctx))
		return nil
	}, m.lag)
	if err != nil {
		return nil, fmt.Errorf("registering lag gauge: %w", err)
	}
	return reg, nil
}
