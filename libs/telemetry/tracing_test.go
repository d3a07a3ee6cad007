package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/telemetry"
	"msgexchange/libs/testutil/otlptest"
)

func tracingConfig(endpoint string) telemetry.TracingConfig {
	return telemetry.TracingConfig{Endpoint: endpoint, Insecure: true, SampleRatio: 1, ExportTimeout: 5 * time.Second}
}

// With no endpoint, here or in the environment, there is no exporter:
// spans are no-ops without a trace context and no traceparent can be
// written.
func TestTracing_R_I4_NoEndpointNoExporterNothingSent(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	tr, err := telemetry.NewTracing(tracingConfig(""), "msgx-test", telemetry.Build{Version: "test"})
	require.NoError(t, err)
	require.False(t, tr.Enabled(), "no endpoint: tracing is off")

	ctx, span := tr.Provider().Tracer("msgexchange/test").Start(context.Background(), "work")
	require.False(t, span.IsRecording(), "a no-op provider records nothing")
	require.False(t, span.SpanContext().IsValid(), "a no-op span carries no trace context")
	parent, state := telemetry.TraceParent(ctx)
	require.Empty(t, parent, "no traceparent header is written when tracing is off")
	require.Empty(t, state)
	span.End()
	require.NoError(t, tr.Shutdown(context.Background()))
}

// TestTracing_R_N2_OTELEnvironmentHonoured: without the flag,
// OTEL_EXPORTER_OTLP_ENDPOINT alone turns tracing on, over gRPC or, with
// OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, over HTTP; the exporter
// sends OTEL_EXPORTER_OTLP_HEADERS' headers (the HTTP receiver sees
// them); OTEL_RESOURCE_ATTRIBUTES (the chart's downward-API k8s.*
// attributes) and OTEL_SERVICE_NAME reach the resource beside the
// process's own attributes.
func TestTracing_R_N2_OTELEnvironmentHonoured(t *testing.T) {
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			rcv := otlptest.Start(t)
			endpoint := "http://" + rcv.Endpoint
			if protocol == "http/protobuf" {
				endpoint = rcv.StartHTTP(t)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "k8s.pod.name=msgx-processor-0,k8s.namespace.name=ops,k8s.node.name=node-3")
			t.Setenv("OTEL_SERVICE_NAME", "msgx-processor")

			tr, err := telemetry.NewTracing(tracingConfig(""), "processor", telemetry.Build{Version: "1.2.3"})
			require.NoError(t, err)
			require.True(t, tr.Enabled(), "OTEL_EXPORTER_OTLP_ENDPOINT alone enables tracing")
			_, span := tr.Provider().Tracer("msgexchange/test").Start(context.Background(), "probe")
			span.End()
			require.NoError(t, tr.Shutdown(context.Background()))
			require.True(t, rcv.WaitFor(10*time.Second, func(s []otlptest.Span) bool { return len(s) == 1 }), "the span arrives over %s", protocol)
			got := rcv.Spans()[0]
			require.Equal(t, "probe", got.Name)
			require.Equal(t, "msgx-processor", got.Service, "OTEL_SERVICE_NAME")
			for k, v := range map[string]string{"k8s.pod.name": "msgx-processor-0", "k8s.namespace.name": "ops", "k8s.node.name": "node-3",
				"service.namespace": "msgexchange", "service.version": "1.2.3", "telemetry.sdk.language": "go"} {
				require.Equal(t, v, got.Resource[k], k)
			}
		})
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err := telemetry.NewTracing(tracingConfig(""), "processor", telemetry.Build{})
	require.ErrorContains(t, err, `OTEL_EXPORTER_OTLP_PROTOCOL "http/json": want grpc or http/protobuf`)
}

// A span exported by the provider carries its trace ID and parent: the
// context written as a traceparent and read back continues the trace.
func TestTracing_R_I4_TraceParentRoundTrip(t *testing.T) {
	rcv := otlptest.Start(t)
	tr, err := telemetry.NewTracing(tracingConfig(rcv.Endpoint), "msgx-test", telemetry.Build{})
	require.NoError(t, err)
	tracer := tr.Provider().Tracer("msgexchange/test")
	ctx, first := tracer.Start(context.Background(), "first")
	parent, _ := telemetry.TraceParent(ctx)
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, parent)
	first.End()

	later := telemetry.ContextWithTraceParent(context.Background(), parent, "")
	_, second := tracer.Start(later, "second")
	require.Equal(t, first.SpanContext().TraceID(), second.SpanContext().TraceID())
	second.End()
	require.NoError(t, tr.Shutdown(context.Background()))

	spans := rcv.Spans()
	require.Len(t, spans, 2)
	byName := map[string]otlptest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	require.Equal(t, byName["first"].TraceID, byName["second"].TraceID)
	require.Equal(t, byName["first"].SpanID, byName["second"].ParentID)
	require.Empty(t, byName["first"].ParentID)

	// An empty or malformed traceparent leaves the context without a parent.
	require.False(t, trace.SpanContextFromContext(telemetry.ContextWithTraceParent(context.Background(), "", "")).IsValid())
	require.False(t, trace.SpanContextFromContext(telemetry.ContextWithTraceParent(context.Background(), "00-zz-00-01", "")).IsValid())
}

func TestTracingConfig_R_I4_Validate(t *testing.T) {
	c := tracingConfig("collector:4317")
	require.NoError(t, c.Validate())
	c.SampleRatio = 1.5
	require.ErrorContains(t, c.Validate(), "tracing.sample-ratio")
	c = tracingConfig("collector:4317")
	c.TLS.CAFile = "/nonexistent/ca.pem"
	err := c.Validate()
	require.ErrorContains(t, err, "tracing.otlp-insecure")
	require.ErrorContains(t, err, "tracing.tls.")
}
