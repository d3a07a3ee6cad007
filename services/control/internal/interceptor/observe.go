package interceptor

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Observe logs every call at debug level with its method, status code and
// duration, and records the duration in the histogram
// msgx_control_rpc_duration_seconds (labels rpc_method, rpc_code). Durations
// are measured on the wall clock: they are telemetry, not logic.
type Observe struct {
	logger   *slog.Logger
	duration metric.Float64Histogram
}

// NewObserve creates the histogram on meter.
func NewObserve(logger *slog.Logger, meter metric.Meter) (*Observe, error) {
	h, err := meter.Float64Histogram("msgx_control_rpc_duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of control-plane gRPC calls, by method and status code."))
	if err != nil {
		return nil, err
	}
	return &Observe{logger: logger, duration: h}, nil
}

// Unary returns the unary server interceptor.
func (o *Observe) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		o.record(ctx, info.FullMethod, start, err)
		return resp, err
	}
}

// Stream returns the stream server interceptor.
func (o *Observe) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		o.record(ss.Context(), info.FullMethod, start, err)
		return err
	}
}

func (o *Observe) record(ctx context.Context, method string, start time.Time, err error) {
	d := time.Since(start)
	code := status.Code(err)
	o.duration.Record(ctx, d.Seconds(), metric.WithAttributes(
		attribute.String("rpc_method", method),
		attribute.String("rpc_code", code.String())))
	attrs := []any{"method", method, "code", code.String(), "duration", d}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	o.logger.Debug("control-plane call", attrs...)
}
