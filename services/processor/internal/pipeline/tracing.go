package pipeline

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/kafka"
	"msgexchange/libs/telemetry"
	"msgexchange/services/internal/contract"
)

// Spans of a message in the processor (R-I4).
const (
	// SpanRegister covers registering an inbox record in proc_state; it
	// continues the trace the record's headers carry, and its context is
	// stored with the message (proc_state.trace_parent).
	SpanRegister = "processor.register"
	// SpanExecute covers one execution of the message at the FIFO head;
	// its parent is the stored register span, so the execution — which
	// runs from the head, not from the record — stays in the message's
	// trace. Its context goes into the outbox rows the execution writes,
	// and from there into the records the dispatcher produces.
	SpanExecute = "processor.execute"
)

func (e *Engine) tracer() trace.Tracer { return e.opt.Kafka.Tracer("processor") }

// registerSpans are the register spans of one inbox batch, by record.
type registerSpans map[*kgo.Record]trace.Span

// traceRegistration starts the register span of every record from the
// trace its headers carry.
func (e *Engine) traceRegistration(ctx context.Context, recs []*kgo.Record) registerSpans {
	spans := make(registerSpans, len(recs))
	tr := e.tracer()
	for _, r := range recs {
		_, span := tr.Start(kafka.RecordContext(ctx, r), SpanRegister, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(kafka.MessagingAttributes(kafka.OpProcess, r, "")...), // R-N2
			trace.WithAttributes(attribute.String("msgx.msg_id", string(r.Key))))
		spans[r] = span
	}
	return spans
}

// traceParent returns the trace context to store with r's message, ""
// when it has none.
func (sp registerSpans) traceParent(r *kgo.Record) (parent, state string) {
	span, ok := sp[r]
	if !ok {
		return "", ""
	}
	return telemetry.TraceParent(trace.ContextWithSpan(context.Background(), span))
}

// end ends every span with the outcome of the registration.
func (sp registerSpans) end(err error) {
	for _, span := range sp {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "registering inbox records failed")
		}
		span.End()
	}
}

// execution is the trace state of one execution, carried in its context:
// the span and the flights the execution wrote, which the apply and
// finish log lines name.
type execution struct {
	span  trace.Span
	mu    sync.Mutex
	flids []int64
}

type executionKey struct{}

// startExecution starts the execution span of h as a child of the span
// that registered it.
func (e *Engine) startExecution(ctx context.Context, h *head) (context.Context, *execution) {
	parent := ctx
	if h.TraceParent != nil {
		state := ""
		if h.TraceState != nil {
			state = *h.TraceState
		}
		parent = telemetry.ContextWithTraceParent(ctx, *h.TraceParent, state)
	}
	ctx, span := e.tracer().Start(parent, SpanExecute, trace.WithAttributes(
		attribute.Int64("msgx.msg_id", h.MsgID), attribute.Int("msgx.attempt", h.Attempts+1)))
	x := &execution{span: span}
	return context.WithValue(ctx, executionKey{}, x), x
}

// end ends the execution span with its outcome and the flights written.
func (x *execution) end(err error) {
	x.mu.Lock()
	flids := slices.Clone(x.flids)
	x.mu.Unlock()
	if len(flids) > 0 {
		x.span.SetAttributes(attribute.Int64Slice("msgx.flids", flids), attribute.Int("msgx.flights", len(flids)))
	}
	if err != nil {
		x.span.RecordError(err)
		x.span.SetStatus(codes.Error, "execution did not finish the message")
	}
	x.span.End()
}

// maxLoggedFLIDs bounds the FLIDs a log line names: a snapshot batch
// writes thousands of flights, the line names the first ones and the
// count.
const maxLoggedFLIDs = 20

// noteFlight records that the execution in ctx wrote flid.
func noteFlight(ctx context.Context, flid int64) {
	x, ok := ctx.Value(executionKey{}).(*execution)
	if !ok {
		return
	}
	x.mu.Lock()
	if !slices.Contains(x.flids, flid) {
		x.flids = append(x.flids, flid)
	}
	x.mu.Unlock()
}

// flightAttrs returns the log attributes naming the flights the execution
// in ctx wrote: flid for one, flids (the first maxLoggedFLIDs) and
// flights (the count) for several, nothing for none.
func flightAttrs(ctx context.Context) []any {
	x, ok := ctx.Value(executionKey{}).(*execution)
	if !ok {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	switch len(x.flids) {
	case 0:
		return nil
	case 1:
		return []any{"flid", x.flids[0]}
	}
	ids := x.flids[:min(len(x.flids), maxLoggedFLIDs)]
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return []any{"flids", out, "flights", len(x.flids)}
}

// traceOf returns the trace context a flight change written in ctx
// carries on its outbox rows: the execution span's.
func traceOf(ctx context.Context) contract.Trace {
	parent, state := telemetry.TraceParent(ctx)
	return contract.Trace{Parent: parent, State: state}
}
