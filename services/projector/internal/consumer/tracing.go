package consumer

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/kafka"
	"msgexchange/services/projector/internal/store"
)

// SpanApply is the span of one flight-state record written to Redis
// (R-I4). It continues the trace the record's headers carry — the
// processor's execution of the message that changed the flight — so the
// projection ends the message's trace. A record without trace context (a
// rebuild, the history sweep, tracing off) gets no span.
const SpanApply = "projector.apply"

// startApply starts the apply span of r, nil when r carries no trace.
func (c *Consumer) startApply(ctx context.Context, r *kgo.Record, d decoded) trace.Span {
	rctx := kafka.RecordContext(ctx, r)
	if !trace.SpanContextFromContext(rctx).IsValid() {
		return nil
	}
	_, span := c.kafka.Tracer("projector").Start(rctx, SpanApply, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(kafka.MessagingAttributes(kafka.OpProcess, r, c.cfg.Group)...), trace.WithAttributes( // R-N2
			attribute.Int64("msgx.flid", d.update.FLID), attribute.Int64("msgx.version", d.update.Version),
			attribute.Int64("msgx.msg_id", d.msgID), attribute.Bool("msgx.deleted", d.update.Value == nil),
			attribute.Bool("msgx.repair", d.update.Repair)))
	return span
}

// logCtx is the context a log line about d is written with: ctx carrying
// d's span, so the line names its trace.
func (d decoded) logCtx(ctx context.Context) context.Context {
	if d.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, d.span)
}

// endApply ends the apply spans of a batch with their outcomes, or with
// err when the batch was not written.
func endApply(recs []decoded, outcomes []store.Outcome, err error) {
	for i, d := range recs {
		if d.span == nil {
			continue
		}
		switch {
		case err != nil:
			d.span.RecordError(err)
			d.span.SetStatus(codes.Error, "not written to redis")
		case i < len(outcomes):
			d.span.SetAttributes(attribute.String("msgx.outcome", outcomes[i].String()))
		}
		d.span.End()
	}
}
