package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracer returns the tracer of one component from Tracing, or a no-op
// tracer when tracing is off. The services take the tracer of their
// message spans from here because a message's trace follows its Kafka
// records: both the spans and the record headers are on, or both off.
func (c *Config) Tracer(component string) trace.Tracer {
	if c.Tracing == nil {
		return noop.NewTracerProvider().Tracer("msgexchange/" + component)
	}
	return c.Tracing.Tracer("msgexchange/" + component)
}

// traceHooks are kotel's tracing hooks (a publish span per produced record
// with its W3C trace context injected into the headers, a receive span per
// fetched record whose context is extracted from them and left in
// Record.Context), limited to the records that belong to a trace: a record
// produced without a span in its context, or fetched without a
// traceparent header, is passed through untouched. Without that limit
// every projection ack, rebuild record and history-sweep change would
// start a trace of its own and carry a traceparent that names no message.
//
// kotel names its attributes after an old version of the messaging
// semantic conventions (messaging.operation=publish, messaging.kafka.partition);
// the hooks add the current ones (MessagingAttributes) to the same spans,
// so every Kafka-related span carries one vocabulary (R-N2).
type traceHooks struct {
	t *kotel.Tracer
	// group is the client's consumer group, "" for none; set when the
	// client is created.
	group string
}

var (
	_ kgo.HookNewClient               = (*traceHooks)(nil)
	_ kgo.HookProduceRecordBuffered   = (*traceHooks)(nil)
	_ kgo.HookProduceRecordUnbuffered = (*traceHooks)(nil)
	_ kgo.HookFetchRecordBuffered     = (*traceHooks)(nil)
	_ kgo.HookFetchRecordUnbuffered   = (*traceHooks)(nil)
)

func newTraceHooks(tp trace.TracerProvider, clientID string) *traceHooks {
	return &traceHooks{t: kotel.NewTracer(
		kotel.TracerProvider(tp),
		kotel.TracerPropagator(propagation.TraceContext{}),
		kotel.ClientID(clientID),
	)}
}

// OnNewClient learns the client's consumer group, which the consumer
// spans name.
func (h *traceHooks) OnNewClient(cl *kgo.Client) {
	h.group, _ = cl.OptValue(kgo.ConsumerGroup).(string)
}

func (h *traceHooks) OnProduceRecordBuffered(r *kgo.Record) {
	if r.Context == nil || !trace.SpanContextFromContext(r.Context).IsValid() {
		return
	}
	h.t.OnProduceRecordBuffered(r)
	trace.SpanFromContext(r.Context).SetAttributes(MessagingAttributes(OpSend, r, "")...)
}

// OnProduceRecordUnbuffered ends the publish span; for a record the
// buffered hook skipped, the context holds no recording span and ending
// it does nothing.
func (h *traceHooks) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if r.Context == nil {
		return
	}
	trace.SpanFromContext(r.Context).SetAttributes(SentAttributes(r, err)...)
	h.t.OnProduceRecordUnbuffered(r, err)
}

func (h *traceHooks) OnFetchRecordBuffered(r *kgo.Record) {
	if !hasHeader(r, "traceparent") {
		return
	}
	h.t.OnFetchRecordBuffered(r)
	trace.SpanFromContext(r.Context).SetAttributes(MessagingAttributes(OpReceive, r, h.group)...)
}

func (h *traceHooks) OnFetchRecordUnbuffered(r *kgo.Record, polled bool) {
	if r.Context == nil {
		return
	}
	h.t.OnFetchRecordUnbuffered(r, polled)
}

func hasHeader(r *kgo.Record, key string) bool {
	for _, h := range r.Headers {
		if h.Key == key {
			return true
		}
	}
	return false
}

// RecordContext returns the context a consumer continues a record's trace
// from: the receive span the hooks left in Record.Context, or ctx when
// the record belongs to no trace. Its values and cancellation stay those
// of ctx; only the span context is taken from the record.
func RecordContext(ctx context.Context, r *kgo.Record) context.Context {
	if r.Context == nil {
		return ctx
	}
	sc := trace.SpanContextFromContext(r.Context)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}
