// Package freshness tells how old the projection is (R-N1): the time since
// Redis last held every record msgx.flight-state had, not the time since a
// flight last changed (a quiet hour is not staleness).
//
// Every probe reads the topic's end offsets at a time T and keeps them as
// a sample; once the consumer group's committed offsets reach a sample's
// end offsets, everything the topic held at T is in Redis (offsets are
// committed only after Redis holds the batch and its acks are durable), so
// the projection is current as of T. That time is recorded in Redis beside
// the projection, where every instance reads it: the flight list of an
// instance started during a Kafka outage still says how old it is. While
// the brokers cannot be reached no sample is taken and the age grows,
// which is what a reader of the list needs to know.
package freshness

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/lifecycle"
)

// ServiceName is the lifecycle name of the probe loop.
const ServiceName = "projector-freshness"

// maxSamples bounds the samples kept while the group catches up: a newer
// sample proves currency at a later time, so the oldest are dropped first.
const maxSamples = 64

// Offsets reads the topic's end offsets and the group's committed ones, by
// partition; consumer.Consumer implements it.
type Offsets interface {
	EndOffsets(ctx context.Context) (map[int32]int64, error)
	Committed(ctx context.Context) (map[int32]int64, error)
}

// Marks keeps the time the projection was last current; store.Store
// implements it.
type Marks interface {
	MarkCurrent(ctx context.Context, at time.Time) (time.Time, error)
	CurrentAt(ctx context.Context) (time.Time, bool, error)
}

// Options tune the probe.
type Options struct {
	// Interval is the time between probes, and so about the least age
	// reported while the projector keeps up.
	Interval time.Duration
	// Timeout bounds one probe's calls to the brokers and to Redis.
	Timeout time.Duration
}

type sample struct {
	at   time.Time
	ends map[int32]int64
}

// Tracker probes the projection's currency and reports its age.
type Tracker struct {
	offsets Offsets
	marks   Marks
	clock   clock.Clock
	logger  *slog.Logger
	opt     Options

	mu        sync.Mutex
	samples   []sample
	currentAt time.Time // zero until known
}

// New returns the tracker and registers its gauge,
// msgx_projector_projection_age_seconds, on meter.
func New(offsets Offsets, marks Marks, clk clock.Clock, logger *slog.Logger, meter metric.Meter, opt Options) (*Tracker, error) {
	t := &Tracker{offsets: offsets, marks: marks, clock: clk, logger: logger.With("component", ServiceName), opt: opt}
	_, err := meter.Float64ObservableGauge("msgx_projector_projection_age_seconds",
		metric.WithUnit("s"),
		metric.WithDescription("how long ago the Redis projection last held every record of msgx.flight-state; grows while the projector lags or cannot reach the brokers (absent until first known)"),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			if age, ok := t.Age(); ok {
				o.Observe(age.Seconds())
			}
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("creating freshness gauge: %w", err)
	}
	return t, nil
}

// Age returns how old the projection is; ok is false before any instance
// recorded its currency.
func (t *Tracker) Age() (time.Duration, bool) {
	t.mu.Lock()
	at := t.currentAt
	t.mu.Unlock()
	if at.IsZero() {
		return 0, false
	}
	return max(t.clock.Now().Sub(at), 0), true
}

// Service returns the probe loop. It never fails: a probe that cannot
// reach the brokers or Redis is simply not counted.
func (t *Tracker) Service() *lifecycle.Service {
	return lifecycle.NewService(ServiceName, nil, func(ctx context.Context) error {
		for {
			t.Probe(ctx)
			if backoff.Sleep(ctx, t.opt.Interval) != nil {
				return nil
			}
		}
	}, nil)
}

// Probe takes one sample, records the projection's currency when the group
// reached an earlier sample, and reads back the recorded time.
func (t *Tracker) Probe(ctx context.Context) {
	now := t.clock.Now() // before the end offsets: they include all written before now
	pctx, cancel := context.WithTimeout(ctx, t.opt.Timeout)
	defer cancel()
	if ends, err := t.offsets.EndOffsets(pctx); err == nil {
		t.addSample(sample{at: now, ends: ends})
	} else {
		t.logger.Debug("reading flight-state end offsets", "err", err)
	}
	if committed, err := t.offsets.Committed(pctx); err == nil {
		if at, ok := t.reached(committed); ok {
			if _, err := t.marks.MarkCurrent(pctx, at); err != nil {
				t.logger.Debug("recording projection currency", "err", err)
			}
		}
	} else {
		t.logger.Debug("reading flight-state committed offsets", "err", err)
	}
	if at, ok, err := t.marks.CurrentAt(pctx); err == nil && ok {
		t.mu.Lock()
		if at.After(t.currentAt) {
			t.currentAt = at
		}
		t.mu.Unlock()
	}
}

func (t *Tracker) addSample(s sample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.samples = append(t.samples, s)
	if len(t.samples) > maxSamples {
		t.samples = t.samples[len(t.samples)-maxSamples:]
	}
}

// reached returns the time of the newest sample whose every end offset the
// committed offsets reached, dropping it and every older sample.
func (t *Tracker) reached(committed map[int32]int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	newest := -1
	for i, s := range t.samples {
		if covers(committed, s.ends) {
			newest = i
		}
	}
	if newest < 0 {
		return time.Time{}, false
	}
	at := t.samples[newest].at
	t.samples = t.samples[newest+1:]
	return at, true
}

func covers(committed, ends map[int32]int64) bool {
	for p, end := range ends {
		if committed[p] < end {
			return false
		}
	}
	return true
}
