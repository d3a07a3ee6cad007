package telemetry

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/credentials"

	"msgexchange/libs/config"
)

// TracingConfig says where the process exports its spans. Without an
// endpoint here the OpenTelemetry environment decides, as the SDK's
// conventions say (R-N2): OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) turns tracing on, and the exporter
// itself reads its protocol, headers, TLS, timeout and compression from
// OTEL_EXPORTER_OTLP_*. With neither, tracing is off: no exporter exists,
// nothing is dialled, and the provider is a no-op whose spans cost nothing
// and carry no trace context, so no traceparent header is written either.
type TracingConfig struct {
	// Endpoint is the host:port of an OTLP/gRPC receiver (an OpenTelemetry
	// Collector, Tempo, Jaeger); empty turns tracing off.
	Endpoint string `yaml:"otlp_endpoint"`
	// Insecure sends spans in plaintext, for a collector on the same node
	// or in the local stack; otherwise the connection is TLS.
	Insecure bool `yaml:"otlp_insecure"`
	// TLS verifies the receiver (CA bundle, client certificate for mutual
	// TLS, server name); without files the system's roots are used.
	TLS config.TLS `yaml:"tls"`
	// SampleRatio is the share of new traces recorded, 0..1; a span whose
	// parent was sampled is always recorded, so a message's trace is never
	// cut in the middle by another service's sampling decision.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ExportTimeout bounds one export request.
	ExportTimeout time.Duration `yaml:"export_timeout"`
}

// RegisterFlags registers the tracing.* flags.
func (c *TracingConfig) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.Endpoint, prefix+"otlp-endpoint", "", "host:port of the OTLP/gRPC trace receiver; empty leaves it to OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables, and without those tracing is off (no exporter, no trace headers)")
	fs.BoolVar(&c.Insecure, prefix+"otlp-insecure", false, "send spans to the OTLP receiver in plaintext instead of TLS")
	c.TLS.RegisterFlags(prefix+"tls.", "OTLP trace receiver", fs)
	fs.Float64Var(&c.SampleRatio, prefix+"sample-ratio", 1, "share of new traces recorded, 0..1 (children follow their parent's decision)")
	fs.DurationVar(&c.ExportTimeout, prefix+"export-timeout", 10*time.Second, "timeout of one span export request")
}

// Enabled reports whether an endpoint is configured, here or in the
// OpenTelemetry environment.
func (c *TracingConfig) Enabled() bool { return c.Endpoint != "" || envEndpoint() }

// envEndpoint reports whether the OpenTelemetry environment names an OTLP
// trace endpoint.
func envEndpoint() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// envProtocol is the OTLP protocol the environment asks for: "grpc"
// (the default) or "http/protobuf".
func envProtocol() string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "grpc"
}

// Validate reports a sample ratio outside 0..1, plaintext combined with TLS
// files, and unreadable TLS files.
func (c *TracingConfig) Validate() error {
	var errs []error
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		errs = append(errs, fmt.Errorf("tracing.sample-ratio %v: want 0..1", c.SampleRatio))
	}
	if c.ExportTimeout <= 0 {
		errs = append(errs, fmt.Errorf("tracing.export-timeout %v: must be positive", c.ExportTimeout))
	}
	if c.Insecure && c.TLS.On() {
		errs = append(errs, errors.New("tracing.otlp-insecure: plaintext cannot be combined with tracing.tls.*"))
	}
	errs = append(errs, c.TLS.Validate("tracing.tls."))
	return errors.Join(errs...)
}

// Tracing owns the process's tracer provider. It is built once by the
// composition root and handed to the components that start spans; it is
// never registered as the global provider, so a library cannot trace
// behind the configuration's back.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when off
}

// NewTracing builds the tracer provider of c: a batching OTLP exporter
// when an endpoint is configured or the environment names one, a no-op
// provider otherwise.
// service names the process in the spans' resource (service.name).
// Dialling is lazy: an unreachable receiver delays nothing at start and
// only costs dropped spans, never a stalled pipeline.
func NewTracing(c TracingConfig, service string, build Build) (*Tracing, error) {
	if !c.Enabled() {
		return &Tracing{provider: noop.NewTracerProvider()}, nil
	}
	exp, err := newExporter(c)
	if err != nil {
		return nil, err
	}
	// The process's own attributes first; OTEL_RESOURCE_ATTRIBUTES and
	// OTEL_SERVICE_NAME after them, so the environment (the chart's
	// downward-API k8s.* attributes) adds to them and may override.
	res, err := resource.New(context.Background(),
		resource.WithAttributes(
			attribute.String("service.name", service),
			attribute.String("service.namespace", "msgexchange"),
			attribute.String("service.version", build.Version),
			attribute.String("vcs.ref.head.revision", build.Commit),
		),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("building the trace resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		// Without OTEL_TRACES_SAMPLER the SDK would sample everything;
		// the configured ratio applies instead. With it, the SDK's own
		// environment handling chooses the sampler.
		topts = append(topts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))))
	}
	sdk := sdktrace.NewTracerProvider(topts...)
	return &Tracing{provider: sdk, sdk: sdk}, nil
}

// newExporter is the OTLP trace exporter: to the configured endpoint over
// gRPC with this configuration's TLS; else as the OTEL_EXPORTER_OTLP_*
// environment says, over gRPC or HTTP (OTEL_EXPORTER_OTLP_PROTOCOL
// http/protobuf), the exporter reading endpoint, headers, TLS, timeout
// and compression itself.
func newExporter(c TracingConfig) (*otlptrace.Exporter, error) {
	if c.Endpoint == "" {
		var (
			exp *otlptrace.Exporter
			err error
		)
		switch p := envProtocol(); p {
		case "grpc":
			exp, err = otlptracegrpc.New(context.Background())
		case "http/protobuf":
			exp, err = otlptracehttp.New(context.Background())
		default:
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf", p)
		}
		if err != nil {
			return nil, fmt.Errorf("creating OTLP trace exporter from the OTEL_EXPORTER_OTLP_* environment: %w", err)
		}
		return exp, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(c.Endpoint), otlptracegrpc.WithTimeout(c.ExportTimeout)}
	if c.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	} else {
		tc, err := c.TLS.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("tracing.tls.%w", err)
		}
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tc)))
	}
	exp, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("creating OTLP trace exporter: %w", err)
	}
	return exp, nil
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t.sdk != nil }

// Provider returns the tracer provider: the SDK's when tracing is on, a
// no-op one otherwise.
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Shutdown exports the spans still buffered and closes the exporter; it
// is a no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutting down tracer provider: %w", err)
	}
	return nil
}

// Propagator is the W3C trace context propagator (traceparent and
// tracestate), the one format every hop of a message uses: Kafka record
// headers, the stored trace of a message and the consumer topics.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// TraceParent returns the W3C traceparent and tracestate of the span in
// ctx, or "" when ctx carries no valid span context (tracing off).
func TraceParent(ctx context.Context) (parent, state string) {
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// ContextWithTraceParent returns ctx carrying the remote span context of
// traceparent (and tracestate), so that a span started from it continues
// that trace. An empty or invalid traceparent leaves ctx as it is.
func ContextWithTraceParent(ctx context.Context, parent, state string) context.Context {
	if parent == "" {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": parent, "tracestate": state})
}

// ValidateProduction refuses, for production mode (R-K1), plaintext span
// export to a receiver off the machine: spans carry message IDs, flight
// keys and error texts. A collector on loopback (a sidecar) may be
// plaintext.
func (c *TracingConfig) ValidateProduction() error {
	if c.Enabled() && c.Insecure && !config.LoopbackAddr(c.Endpoint) {
		return config.Refusal("tracing.otlp-insecure", "spans to a receiver off this machine go over TLS; drop tracing.otlp-insecure and give tracing.tls.ca-file for a private CA")
	}
	return nil
}
