package telemetry

import (
	"slices"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Bucket boundaries of the histograms in seconds, one set per kind of
// duration, fitted to what the system measures. They are defined here once
// and applied by SecondsView to every histogram whose unit is "s" or whose
// name ends in _seconds, whatever boundaries the instrument asks for; the
// SDK's defaults (0, 5, 10, 25, … 10000) are meant for milliseconds and put
// every execution of a few milliseconds into one bucket.
var (
	// ExecutionBuckets: work done in process on one message or one batch.
	// A message's execution measures 1–50 ms (docs/performance.md: mean 7.6
	// ms under load), so the buckets are densest there and end at 10 s for
	// the pathological head.
	ExecutionBuckets = []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 10}
	// LatencyBuckets: a message's way through the system, one stage or end
	// to end. Stages measure from under 1 ms (inbox → registered) to about
	// 1 s (mailbox → inbox at the default poll interval), end to end 10 ms–
	// 10 s (docs/performance.md); the tail up to 5 min still tells a slow
	// stage from a stuck one (the backlog alerts take over beyond that).
	LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 30, 60, 120, 300}
	// CallBuckets: one request to another process — a gRPC or HTTP call, a
	// Kafka request, a scan round of the mailbox. Sub-millisecond on
	// loopback, up to the 30 s timeouts of the clients.
	CallBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	// LongBuckets: operations of seconds to an hour, such as a projection
	// recovery or rebuild (a 100,000-flight rebuild takes tens of seconds).
	LongBuckets = []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
)

// bucketRules choose the boundaries by a fragment of the histogram's name,
// first match wins; any other seconds histogram gets CallBuckets.
var bucketRules = []struct {
	fragment string
	buckets  []float64
}{
	{"_execution_", ExecutionBuckets},
	{"_latency_", LatencyBuckets},
	{"_recovery_duration", LongBuckets},
	{"_rebuild_duration", LongBuckets},
}

// BucketsFor returns the boundaries SecondsView gives the histogram name.
func BucketsFor(name string) []float64 {
	for _, r := range bucketRules {
		if strings.Contains(name, r.fragment) {
			return slices.Clone(r.buckets)
		}
	}
	return slices.Clone(CallBuckets)
}

// IsSeconds reports whether an instrument of this name and unit records
// seconds.
func IsSeconds(name, unit string) bool {
	return unit == "s" || strings.HasSuffix(name, "_seconds")
}

// SecondsView gives every histogram in seconds the boundaries of
// BucketsFor; it leaves every other instrument alone.
func SecondsView(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if i.Kind != sdkmetric.InstrumentKindHistogram || !IsSeconds(i.Name, i.Unit) {
		return sdkmetric.Stream{}, false
	}
	return sdkmetric.Stream{
		Name:        i.Name,
		Description: i.Description,
		Unit:        i.Unit,
		Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: BucketsFor(i.Name)},
	}, true
}
