package logging

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// traceHandler adds trace_id and span_id to every record logged with a
// context that carries a valid span (the *Context logging methods), so a
// log line about a message leads to its trace and back. Records logged
// without such a context are passed on unchanged.
type traceHandler struct{ next slog.Handler }

// WithTrace wraps h so that records logged with a span's context carry
// trace_id and span_id.
func WithTrace(h slog.Handler) slog.Handler { return traceHandler{next: h} }

func (h traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{next: h.next.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{next: h.next.WithGroup(name)}
}
