package telemetry_test

import (
	"context"
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

// With no endpoint there is no exporter: spans are no-ops without a trace
// context, no traceparent can be written, and a receiver named by the
// standard OTEL_EXPORTER_OTLP_* variables still gets nothing — only the
// flag turns tracing on.
func TestTracing_R_I4_NoEndpointNoExporterNothingSent(t *testing.T) {
	rcv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+rcv.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+rcv.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")

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

	// The same receiver does get spans from a provider with the endpoint
	// set, so its silence above is the provider's, not the receiver's.
	on, err := telemetry.NewTracing(tracingConfig(rcv.Endpoint), "msgx-test", telemetry.Build{Version: "test"})
	require.NoError(t, err)
	_, probe := on.Provider().Tracer("msgexchange/test").Start(context.Background(), "probe")
	probe.End()
	require.NoError(t, on.Shutdown(context.Background()))
	spans := rcv.Spans()
	require.Len(t, spans, 1, "only the enabled provider's span arrives")
	require.Equal(t, "probe", spans[0].Name)
	require.Equal(t, "msgx-test", spans[0].Service)
	require.Equal(t, "msgexchange/test", spans[0].Scope)
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
