// Package rpctrace gives gRPC connections their OpenTelemetry spans (R-N2):
// otelgrpc's stats handlers with the process's tracer provider and the W3C
// Trace Context propagator (telemetry.Propagator), the rpc.*
// semantic-convention attributes and the call's status. A client span
// injects its context into the call's metadata, so the control plane's
// server span of the same call (control.go) continues the caller's trace:
// a lease renewal or an msgxctl command is one trace across both
// processes.
package rpctrace

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"msgexchange/libs/telemetry"
)

// ClientOptions returns the dial options that give every call on a
// connection a client span under tp; none when tp is nil (tracing off), so
// a connection without tracing carries no stats handler at all.
func ClientOptions(tp trace.TracerProvider) []grpc.DialOption {
	if tp == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(telemetry.Propagator)))}
}

// ServerOptions returns the server options that give every call a server
// span under tp, continuing the caller's trace; none when tp is nil.
func ServerOptions(tp trace.TracerProvider) []grpc.ServerOption {
	if tp == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(telemetry.Propagator)))}
}
