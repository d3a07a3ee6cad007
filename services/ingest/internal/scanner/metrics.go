package scanner

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics are the scanner's instruments.
type Metrics struct {
	published     metric.Int64Counter
	republished   metric.Int64Counter
	late          metric.Int64Counter
	scanErrors    metric.Int64Counter
	publishErrors metric.Int64Counter
	retired       metric.Int64Counter
	lost          metric.Int64Counter
	duration      metric.Float64Histogram
	// retiredRows is what the current scanner remembers as retired,
	// exported as a gauge; each new scanner starts it at 0.
	retiredRows atomic.Int64
	// positionLost is set while the start of a shadow run is refused
	// (SetShadowPositionLost).
	positionLost atomic.Bool
}

// NewMetrics creates the scanner's instruments on meter:
// msgx_ingest_published_total (every record written to the inbox topic,
// repeats included), msgx_ingest_republished_total (the repeats),
// msgx_ingest_late_arrival_total, msgx_ingest_scan_errors_total,
// msgx_ingest_publish_errors_total, msgx_ingest_scan_duration_seconds,
// msgx_ingest_broker_lost_records_total{topic} (the broker lost inbox
// records it had acknowledged, ErrInboxLost), and for shadow mode (R-L6) msgx_ingest_shadow_retired_total (rows
// retired: republished once and published no more),
// msgx_ingest_shadow_retired_rows (the retired rows the scanner
// remembers) and msgx_ingest_shadow_position_lost (1 while the start is
// refused because the inbox topic lost the run's position).
func NewMetrics(meter metric.Meter) (*Metrics, error) {
	var (
		m    Metrics
		err  error
		errs []error
	)
	counter := func(name, desc string) metric.Int64Counter {
		c, cerr := meter.Int64Counter(name, metric.WithDescription(desc))
		if cerr != nil {
			errs = append(errs, cerr)
		}
		return c
	}
	m.published = counter("msgx_ingest_published_total", "Mailbox rows written to the inbox topic, repeats included.")
	m.republished = counter("msgx_ingest_republished_total", "Mailbox rows written again because they were still unmarked republish-after after their last publication.")
	m.late = counter("msgx_ingest_late_arrival_total", "Mailbox rows first published after higher IDs were read (committed late): found in a gap below the high-water mark or by the reconciliation pass.")
	m.scanErrors = counter("msgx_ingest_scan_errors_total", "Scan rounds abandoned because the mailbox could not be read.")
	m.publishErrors = counter("msgx_ingest_publish_errors_total", "Scan rounds abandoned because records could not be written to the inbox topic.")
	m.lost = counter("msgx_ingest_broker_lost_records_total", "Times the broker was found to have lost inbox records it had acknowledged (an unclean leader election, a restored broker); each time every unmarked mailbox row is published again in mailbox order.")
	m.retired = counter("msgx_ingest_shadow_retired_total", "Shadow mode: mailbox rows the predecessor left unmarked after their republish, published no more until ingest restarts.")
	retiredRows, gerr := meter.Int64ObservableGauge("msgx_ingest_shadow_retired_rows",
		metric.WithDescription("Shadow mode: retired mailbox rows the scanner remembers (still unmarked, published no more); 0 outside shadow mode."))
	if gerr != nil {
		errs = append(errs, gerr)
	}
	positionLost, gerr := meter.Int64ObservableGauge("msgx_ingest_shadow_position_lost",
		metric.WithDescription("Shadow mode: 1 while ingest refuses to start because the inbox topic no longer holds the shadow run's position (ErrShadowPositionLost), 0 otherwise."))
	if gerr != nil {
		errs = append(errs, gerr)
	}
	if len(errs) == 0 {
		_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(retiredRows, m.retiredRows.Load())
			var lost int64
			if m.positionLost.Load() {
				lost = 1
			}
			o.ObserveInt64(positionLost, lost)
			return nil
		}, retiredRows, positionLost)
		if err != nil {
			errs = append(errs, err)
		}
	}
	m.duration, err = meter.Float64Histogram("msgx_ingest_scan_duration_seconds",
		metric.WithDescription("Duration of one scan round, by pass (startup, round, or reconcile: a round with a step of the reconciliation pass) and outcome."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("creating scanner metrics: %w", errs[0])
	}
	return &m, nil
}

// Init exports every counter at zero, so that rates and alerts work before
// the first event (a counter never added to is not exported at all);
// topic is the inbox topic's name.
func (m *Metrics) Init(ctx context.Context, topic string) {
	for _, c := range []metric.Int64Counter{m.published, m.republished, m.late, m.scanErrors, m.publishErrors, m.retired} {
		c.Add(ctx, 0)
	}
	m.lost.Add(ctx, 0, metric.WithAttributes(attribute.String("topic", topic)))
}

// SetShadowPositionLost sets msgx_ingest_shadow_position_lost: lost while
// the start of a shadow run is refused (R-L6), so that the refusal is
// alerted by name and not only as a pod that restarts.
func (m *Metrics) SetShadowPositionLost(lost bool) { m.positionLost.Store(lost) }
