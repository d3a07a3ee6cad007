package control_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"msgexchange/libs/clock"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control"
	"msgexchange/services/control/internal/controltest"
)

// TestControl_R_N2_ServerSpansWithRPCConventions: with a tracer provider
// every call gets a gRPC server span named after its method, with the
// rpc.* semantic-convention attributes, continuing the caller's W3C trace
// context (traceparent in the call's metadata).
func TestControl_R_N2_ServerSpansWithRPCConventions(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	_, pool := controltest.MigratedPool(t)
	svc, err := control.New(testConfig(), control.Deps{Logger: testLogger(t), Clock: clock.NewFake(testNow), Postgres: pool, Tracing: tp})
	require.NoError(t, err)
	startService(t, svc)
	conn, err := grpc.NewClient(svc.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "traceparent", parent)
	_, err = controlv1.NewAdminServiceClient(conn).GetBacklog(ctx, &controlv1.GetBacklogRequest{})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return len(spans.GetSpans()) > 0 }, 10*time.Second, 5*time.Millisecond)
	s := spans.GetSpans()[0]
	require.Equal(t, "msgx.control.v1.AdminService/GetBacklog", s.Name)
	require.Equal(t, trace.SpanKindServer, s.SpanKind)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.SpanContext.TraceID().String(), "continues the caller's trace")
	require.Equal(t, "00f067aa0ba902b7", s.Parent.SpanID().String())
	attrs := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		attrs[kv.Key] = kv.Value.Emit()
	}
	require.Equal(t, "grpc", attrs["rpc.system.name"])
	require.Equal(t, "msgx.control.v1.AdminService/GetBacklog", attrs["rpc.method"])
	require.Equal(t, "OK", attrs["rpc.response.status_code"])
}
