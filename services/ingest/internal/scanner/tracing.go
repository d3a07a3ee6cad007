package scanner

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"msgexchange/libs/kafka"
	"msgexchange/services/ingest/internal/mailbox"
)

// SpanPublish is the span that starts a message's trace: the scanner read
// its mailbox row and publishes it to msgx.inbox. Its context rides the
// record's traceparent header to the processor.
const SpanPublish = "ingest.publish"

// rowSpans are the publish spans of one produce, by record.
type rowSpans map[*kgo.Record]trace.Span

// traceRows starts a publish span for each record (one row each) and puts
// its context in the record, where the Kafka client's tracing hooks find
// it. A republication starts a trace of its own: the processor keeps the
// one of the copy it registers.
func (s *Scanner) traceRows(ctx context.Context, rows []mailbox.Row, recs []*kgo.Record) rowSpans {
	tr := s.cfg.Tracer
	if tr == nil {
		tr = noop.NewTracerProvider().Tracer("")
	}
	spans := make(rowSpans, len(recs))
	for i, r := range recs {
		_, republish := s.published[rows[i].ID]
		rctx, span := tr.Start(ctx, SpanPublish, trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(kafka.MessagingAttributes(kafka.OpSend, r, "")...),
			trace.WithAttributes(attribute.Int64("msgx.msg_id", rows[i].ID), attribute.Bool("msgx.republish", republish),
				attribute.Int("msgx.size_bytes", len(rows[i].Message))))
		r.Context = rctx
		spans[r] = span
	}
	return spans
}

// end ends every span with the outcome of its record's produce.
func (sp rowSpans) end(results kgo.ProduceResults) {
	for _, res := range results {
		// The hooks replaced Record.Context; find the span by record.
		span, ok := sp[res.Record]
		if !ok {
			continue
		}
		span.SetAttributes(kafka.SentAttributes(res.Record, res.Err)...) // R-N2
		if res.Err != nil {
			span.RecordError(res.Err)
			span.SetStatus(codes.Error, "publishing to the inbox topic failed")
		}
		span.End()
		delete(sp, res.Record)
	}
	for _, span := range sp { // no result: the produce was abandoned
		span.SetStatus(codes.Error, "not published")
		span.End()
	}
}
