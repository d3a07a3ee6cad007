package main

import (
	"context"
	"strings"
	"time"

	"msgexchange/libs/telemetry"
)

// initTracing builds the tracer provider of tracing.* (R-I4) and hands it
// to every Kafka client and service through the Kafka configuration; with
// no endpoint nothing is built and the services trace nothing. The
// provider is flushed when the process stops, after the services.
func (a *app) initTracing() error {
	if !a.cfg.Tracing.Enabled() {
		return nil
	}
	b := currentBuild()
	t, err := telemetry.NewTracing(a.cfg.Tracing, a.serviceName(),
		telemetry.Build{Version: b.Version, Commit: b.Commit, GoVersion: b.GoVersion, Platform: b.Platform})
	if err != nil {
		return err
	}
	a.cfg.Kafka.Tracing = t.Provider()
	a.closers = append(a.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			a.log.Warn("flushing spans at shutdown", "err", err)
		}
	})
	a.log.Info("tracing on", "otlp_endpoint", a.cfg.Tracing.Endpoint, "sample_ratio", a.cfg.Tracing.SampleRatio, "service", a.serviceName())
	return nil
}

// serviceName is the service.name of the process's spans: msgx for the
// all-in-one process, msgx-<target> (targets joined by +) otherwise, so a
// trace shows which deployment each span came from.
func (a *app) serviceName() string {
	ts, _ := a.cfg.targets()
	if len(ts) == 0 || len(ts) == len(allTargets) {
		return "msgx"
	}
	return "msgx-" + strings.Join(ts, "+")
}
