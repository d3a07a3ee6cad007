package pipeline

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"msgexchange/libs/lease"
)

type metrics struct {
	registered metric.Int64Counter
	finished   metric.Int64Counter
	failed     metric.Int64Counter
	duration   metric.Float64Histogram
	acks       metric.Int64Counter
	// transactions counts the processor's write transactions by outcome
	// (committed, rolled_back, fenced): the cost of a message in durable
	// commits, and every refused fence (R-H6).
	transactions metric.Int64Counter
	// crashed counts executions found to have ended their process (R-H1).
	crashed metric.Int64Counter
	// panics counts panics recovered while handling one message (R-H1).
	panics metric.Int64Counter
	// selfCheckRepaired counts the stranded messages the self-check
	// finished, by kind (R-H4).
	selfCheckRepaired metric.Int64Counter
	// dead and parked count the messages the processor ended DEAD, by
	// class: rejected or given up on, and parked for a replay (R-L4).
	dead, parked metric.Int64Counter
	// reused counts mailbox IDs that came again with a different text,
	// once per distinct text (R-L5).
	reused metric.Int64Counter
	// cleanedRepublished counts records finished SKIPPED at their
	// registration because the cleanup had deleted the shadowed record of
	// their mailbox ID: republished, never executed again (R-L6).
	cleanedRepublished metric.Int64Counter
	// positionMoved counts the times a consumer found its stored position
	// in PostgreSQL other than its own and consumed again from the stored
	// one, by topic: PostgreSQL lost commits (positions.go).
	positionMoved metric.Int64Counter
	// brokerLost counts the times a consumer of the processor found that
	// the broker lost records of a topic it had consumed, by topic
	// (brokerloss.go).
	brokerLost metric.Int64Counter
	// stages is msgx_processor_stage_latency_seconds{stage}: the time a
	// message took from the previous stage to this one (R-I4).
	stages metric.Float64Histogram
}

// Stages of a message's way through the processor, as labelled in
// msgx_processor_stage_latency_seconds; each is measured from the stage
// before it, from the timestamps proc_state stores.
const (
	// StageInbox: from the mailbox's receive time (received_at) to the
	// registration in proc_state (registered_at).
	StageInbox = "inbox"
	// StageApplied: from the registration to APPLIED (applied_at): the
	// wait at the FIFO head and the execution.
	StageApplied = "applied"
	// StageSucceeded: from APPLIED to SUCCEEDED (finished_at): the wait
	// for the projector's acknowledgements.
	StageSucceeded = "succeeded"
)

// newMetrics creates the processor's instruments; topics are the topics
// its consumers store positions of, labels of positionMoved.
func newMetrics(m metric.Meter, topics ...string) (*metrics, error) {
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
	if out.transactions, err = m.Int64Counter("msgx_processor_transactions_total", metric.WithDescription("write transactions of the processor, by outcome (committed, rolled_back, fenced)")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.crashed, err = m.Int64Counter("msgx_processor_crashed_executions_total", metric.WithDescription("executions of a head that ended the process (panic outside the handler, out-of-memory, kill), counted as attempts")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.panics, err = m.Int64Counter("msgx_processor_handler_panics_total", metric.WithDescription("panics recovered while decoding or handling one message, recorded as its failure")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.selfCheckRepaired, err = m.Int64Counter("msgx_processor_selfcheck_repaired_total",
		metric.WithDescription("stranded messages the self-check finished, by kind (applied-without-pending, terminal-without-intent)")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.positionMoved, err = m.Int64Counter("msgx_processor_consumer_position_moved_total",
		metric.WithDescription("times a consumer of the processor found its position stored in PostgreSQL other than where it stored it and consumed again from the stored one, by topic: PostgreSQL lost commits (a failover to a replica behind, a restore)")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.brokerLost, err = m.Int64Counter("msgx_processor_broker_lost_records_total",
		metric.WithDescription("times a consumer of the processor found that the broker lost acknowledged records of a topic, by topic: a stored position past the partition's end, or a fetch reporting data loss (an unclean leader election, a restored broker); the consumer reads the partition again")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.stages, err = m.Float64Histogram("msgx_processor_stage_latency_seconds", metric.WithUnit("s"),
		metric.WithDescription("time from a message's previous stage to this one, by stage: inbox (mailbox receive time to registration), applied (registration to APPLIED), succeeded (APPLIED to SUCCEEDED)")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.dead, err = m.Int64Counter("msgx_processor_dead_messages_total",
		metric.WithDescription("messages the processor ended DEAD and did not park, by error class (MALFORMED, PROTOCOL, EXHAUSTED): their content is not applied")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.parked, err = m.Int64Counter("msgx_processor_parked_messages_total",
		metric.WithDescription("messages the processor parked DEAD at their first attempt, by error class (CODEC_ERROR, UNSUPPORTED): replayable by class once a release reads or handles them")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.reused, err = m.Int64Counter("msgx_processor_mailbox_id_reused_total",
		metric.WithDescription("mailbox IDs that came again with a different text, once per distinct text: the text is held in mailbox_reuse for an operator, not executed")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	if out.cleanedRepublished, err = m.Int64Counter("msgx_processor_cleaned_republished_total",
		metric.WithDescription("mailbox rows published again after the record cleanup deleted their shadowed record (R-L6): finished SKIPPED at registration, not executed again")); err != nil {
		return nil, fmt.Errorf("creating metric: %w", err)
	}
	// Exported at zero from the start, so an alert on any increase works
	// from the first scrape.
	ctx := context.Background()
	for _, k := range []string{StrandedApplied, StrandedTerminal} {
		out.selfCheckRepaired.Add(ctx, 0, kindAttr(k))
	}
	for _, c := range []string{ClassMalformed, ClassCodec, ClassUnsupported, ClassInfra, ClassProtocol, ClassExhausted} {
		out.failed.Add(ctx, 0, classAttr(c))
	}
	for _, c := range deadClasses {
		out.dead.Add(ctx, 0, classAttr(c))
	}
	for _, c := range parkedClasses {
		out.parked.Add(ctx, 0, classAttr(c))
	}
	for _, st := range []string{StateApplied, StateSucceeded, StateSkipped, StateDead} {
		out.finished.Add(ctx, 0, stateAttr(st))
	}
	for _, o := range []lease.Outcome{lease.Committed, lease.RolledBack, lease.Refused} {
		out.transactions.Add(ctx, 0, outcomeAttr(o))
	}
	for _, t := range topics {
		out.positionMoved.Add(ctx, 0, topicAttr(t))
		out.brokerLost.Add(ctx, 0, topicAttr(t))
	}
	for _, c := range []metric.Int64Counter{out.registered, out.acks, out.crashed, out.panics, out.reused, out.cleanedRepublished} {
		c.Add(ctx, 0)
	}
	return &out, nil
}

// stage records that a message reached stage at `at`, from the previous
// stage at from. A message without the earlier time (a mailbox row
// without a receive time) is not measured; a negative span (clocks of
// different machines) counts as 0.
func (m *metrics) stage(ctx context.Context, stage string, from *time.Time, at time.Time) {
	if from == nil || from.IsZero() {
		return
	}
	m.stages.Record(ctx, max(0, at.Sub(*from).Seconds()), metric.WithAttributes(attribute.String("stage", stage)))
}

func kindAttr(k string) metric.AddOption {
	return metric.WithAttributes(attribute.String("kind", k))
}

func outcomeAttr(o lease.Outcome) metric.AddOption {
	return metric.WithAttributes(attribute.String("outcome", string(o)))
}

// Kinds of stranded message the self-check repairs (R-H4): the kind
// attribute of msgx_processor_selfcheck_repaired_total and of the alert
// log line.
const (
	// StrandedApplied is an APPLIED message without a pending projection:
	// no ack will ever finish it.
	StrandedApplied = "applied-without-pending"
	// StrandedTerminal is a terminal message (SUCCEEDED, SKIPPED, DEAD)
	// whose mailbox marker is not written and that has no backfill intent
	// waiting: nothing will ever mark its mailbox row.
	StrandedTerminal = "terminal-without-intent"
)
