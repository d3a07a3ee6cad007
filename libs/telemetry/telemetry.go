// Package telemetry builds the OpenTelemetry meter provider once per
// process, exported in Prometheus form on /metrics. Libraries receive the
// metric.Meter by injection and never register globals.
//
// Next to the instruments of the services, the registry holds the Go
// runtime and process collectors of the Prometheus client (go_*, process_*:
// the names every Go dashboard and alert already knows) and
// msgx_build_info, so that every scrape says which build answered. Every
// histogram in seconds gets the bucket boundaries of buckets.go through one
// view, never the SDK's defaults, which are meant for milliseconds.
package telemetry

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
)

// Build describes the running binary; it becomes the labels of
// msgx_build_info.
type Build struct {
	Version   string
	Commit    string
	GoVersion string
	Platform  string
}

// Telemetry owns the meter provider and its Prometheus registry.
type Telemetry struct {
	Provider *sdkmetric.MeterProvider
	registry *prometheus.Registry
}

// New builds a meter provider exporting into a fresh Prometheus registry,
// with the Go runtime and process collectors and msgx_build_info{version,
// commit, go_version, platform} = 1.
func New(build Build) (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "msgx_build_info",
		Help: "Always 1; the labels name the build of the running binary.",
		ConstLabels: prometheus.Labels{
			"version":    build.Version,
			"commit":     build.Commit,
			"go_version": build.GoVersion,
			"platform":   build.Platform,
		},
	})
	info.Set(1)
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		info,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering collector: %w", err)
		}
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("creating prometheus exporter: %w", err)
	}
	return &Telemetry{
		// Exemplars (R-N2): a measurement made inside a sampled span keeps
		// its trace and span ID next to the bucket it fell in, so a latency
		// spike on a dashboard leads to a trace of it. The trace-based
		// filter is the SDK's default; naming it keeps it so whatever the
		// default becomes (OTEL_METRICS_EXEMPLAR_FILTER still overrides).
		Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(SecondsView),
			sdkmetric.WithExemplarFilter(exemplar.TraceBasedFilter)),
		registry: reg,
	}, nil
}

// Meter returns the meter of one component.
func (t *Telemetry) Meter(component string) metric.Meter {
	return t.Provider.Meter("msgexchange/" + component)
}

// Gatherer returns the registry /metrics serves, for tests that read the
// exported families.
func (t *Telemetry) Gatherer() prometheus.Gatherer { return t.registry }

// Handler serves the metrics in the Prometheus text format, or in
// OpenMetrics when the scraper asks for it (Accept:
// application/openmetrics-text, what Prometheus sends when exemplar
// storage is on): only OpenMetrics carries the histograms' exemplars
// (trace_id, span_id) (R-N2).
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
}
