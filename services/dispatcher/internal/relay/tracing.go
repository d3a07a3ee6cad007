package relay

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/kafka"
	"msgexchange/libs/telemetry"
)

// SpanRelay is the span of one outbox row the dispatcher produces (R-I4).
// Its parent is the trace context the processor stored in the row's
// headers (the execution of the message that caused the change), so it
// joins the message's trace. The record itself leaves with the headers as
// stored: consumers continue the trace from the processor's span, and the
// records stay exactly as the contract encoded them.
const SpanRelay = "dispatcher.relay"

// relaySpans are the relay spans of one produce, by record; a record whose
// row carries no trace context has none.
type relaySpans map[*kgo.Record]trace.Span

// traceRecords starts the relay span of every record whose headers carry
// a trace context, and logs each at debug level with its trace ID and
// FLID.
func (r *Relay) traceRecords(ctx context.Context, target string, ids []int64, recs []*kgo.Record) relaySpans {
	spans := relaySpans{}
	tr := r.opt.Kafka.Tracer("dispatcher")
	debug := r.log.Enabled(ctx, slog.LevelDebug)
	for i, rec := range recs {
		parent, state, msgID := "", "", int64(0)
		for _, h := range rec.Headers {
			switch h.Key {
			case "traceparent":
				parent = string(h.Value)
			case "tracestate":
				state = string(h.Value)
			case "msgx-msg-id":
				msgID, _ = strconv.ParseInt(string(h.Value), 10, 64)
			}
		}
		if parent == "" {
			continue
		}
		pctx := telemetry.ContextWithTraceParent(ctx, parent, state)
		if !trace.SpanContextFromContext(pctx).IsValid() {
			continue
		}
		flid, _ := strconv.ParseInt(string(rec.Key), 10, 64)
		sctx, span := tr.Start(pctx, SpanRelay, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			kafka.MessagingAttributes(kafka.OpSend, rec, "")...), trace.WithAttributes(
			attribute.String("msgx.target", target), attribute.Int64("msgx.flid", flid),
			attribute.Int64("msgx.msg_id", msgID), attribute.Int64("msgx.outbox_id", ids[i])))
		spans[rec] = span
		if debug {
			r.log.DebugContext(sctx, "relaying outbox row", "target", target, "flid", flid, "msg_id", msgID, "outbox_id", ids[i])
		}
	}
	return spans
}

// end ends every span with the outcome of its record's produce: the
// record's topic, partition and offset (R-N2), or the error.
func (sp relaySpans) end(results kgo.ProduceResults) {
	for _, res := range results {
		span, ok := sp[res.Record]
		if !ok {
			continue
		}
		span.SetAttributes(kafka.SentAttributes(res.Record, res.Err)...)
		if res.Err != nil {
			span.RecordError(res.Err)
			span.SetStatus(codes.Error, "producing the record failed")
		}
		span.End()
		delete(sp, res.Record)
	}
	for _, span := range sp {
		span.SetStatus(codes.Error, "not produced")
		span.End()
	}
}
