package rpctrace_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"msgexchange/services/internal/rpctrace"
)

// TestRPCTrace_R_N2_ClientSpanPropagatesToTheServer: a call on a
// connection dialled with ClientOptions is a CLIENT span with the rpc.*
// conventions, made inside the caller's span, and the server (with
// ServerOptions, as the control plane) continues it: its SERVER span is
// the client span's child in the same trace. Without a provider neither
// side adds a handler.
func TestRPCTrace_R_N2_ClientSpanPropagatesToTheServer(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(rpctrace.ServerOptions(tp)...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), append(rpctrace.ClientOptions(tp),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, parent := tp.Tracer("test").Start(ctx, "operator command")
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	parent.End()

	var client, server sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			switch s.SpanKind() {
			case trace.SpanKindClient:
				client = s
			case trace.SpanKindServer:
				server = s
			}
		}
		return client != nil && server != nil
	}, 10*time.Second, 10*time.Millisecond, "a client and a server span")
	require.Equal(t, "grpc.health.v1.Health/Check", client.Name())
	require.Equal(t, parent.SpanContext().SpanID(), client.Parent().SpanID(), "the client span is the caller's child")
	attrs := map[string]string{}
	for _, kv := range client.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	require.Equal(t, "grpc", attrs["rpc.system.name"], "%v", attrs)
	require.Equal(t, "grpc.health.v1.Health/Check", attrs["rpc.method"])
	require.Equal(t, parent.SpanContext().TraceID(), server.SpanContext().TraceID(), "the server continues the caller's trace")
	require.Equal(t, client.SpanContext().SpanID(), server.Parent().SpanID(), "the server span is the client span's child")

	require.Empty(t, rpctrace.ClientOptions(nil), "tracing off: no handler")
	require.Empty(t, rpctrace.ServerOptions(nil))
}
