// Package telemetry builds the OpenTelemetry meter provider once per
// process, exported in Prometheus form on /metrics. Libraries receive the
// metric.Meter by injection and never register globals.
package telemetry

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Telemetry owns the meter provider and its Prometheus registry.
type Telemetry struct {
	Provider *sdkmetric.MeterProvider
	registry *prometheus.Registry
}

// New builds a meter provider exporting into a fresh Prometheus registry.
func New() (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("creating prometheus exporter: %w", err)
	}
	return &Telemetry{Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)), registry: reg}, nil
}

// Meter returns the meter of one component.
func (t *Telemetry) Meter(component string) metric.Meter {
	return t.Provider.Meter("msgexchange/" + component)
}

// Handler serves the metrics in Prometheus text format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{})
}
