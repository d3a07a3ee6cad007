package relay

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Stages of a message's way through the dispatcher, as labelled in
// msgx_dispatcher_stage_latency_seconds; each is measured from the
// creation of the outbox row (created_at), which the processor writes in
// the transaction of the stage before.
const (
	// StageProduced: from the intent (written when the message was
	// applied) to its record acknowledged by Kafka, by target.
	StageProduced = "produced"
	// StageMarked: from the marker intent (written when the message
	// finished) to the processed marker written on the mailbox row.
	StageMarked = "marked"
)

// initMetrics creates the per-stage latency histogram and exports every
// delivery counter at zero for each target and outcome, so that rates and
// alerts work from the first scrape (a counter never added to is not
// exported at all).
func (r *Relay) initMetrics(m metric.Meter) error {
	var err error
	if r.stages, err = m.Float64Histogram("msgx_dispatcher_stage_latency_seconds", metric.WithUnit("s"),
		metric.WithDescription("time from a message's previous stage to this one, by stage and target: produced (outbox intent to the record acknowledged by Kafka), marked (marker intent to the mailbox row marked)")); err != nil {
		return fmt.Errorf("creating metric: %w", err)
	}
	ctx := context.Background()
	for _, t := range targets {
		for _, c := range []metric.Int64Counter{r.sent, r.dead} {
			c.Add(ctx, 0, targetAttr(t))
		}
		for _, c := range []class{transient, permanent, refused, stalled} {
			r.failed.Add(ctx, 0, classAttrs(t, c))
		}
	}
	for _, t := range kafkaTargets {
		r.lostRecords.Add(ctx, 0, targetAttr(t))
	}
	for _, t := range []string{TargetMailbox, TargetCoutmsgs} {
		r.shadowed.Add(ctx, 0, targetAttr(t)) // exported from the start, like every documented metric
	}
	for _, o := range []string{OutcomeWritten, OutcomeAlreadyMarked, OutcomeRowMissing, OutcomeRowReplaced, OutcomeGaveUp, OutcomeOverdue} {
		r.markers.Add(ctx, 0, metric.WithAttributes(attribute.String("outcome", o)))
	}
	return nil
}

// classAttrs are the attributes of a failure of target: the target and the
// failure's class (R-L2), so that an outage (transient), a loop the
// mailbox refuses (stalled) and a poison row (permanent, refused) are told
// apart on the dashboard.
func classAttrs(target string, c class) metric.AddOption {
	return metric.WithAttributes(attribute.String("target", target), attribute.String("class", c.String()))
}

// stage records that a row of target reached stage at `at`, from its
// intent created at created; a negative span counts as 0.
func (r *Relay) stage(ctx context.Context, stage, target string, created, at time.Time) {
	r.stages.Record(ctx, max(0, at.Sub(created).Seconds()), metric.WithAttributes(
		attribute.String("stage", stage), attribute.String("target", target)))
}
