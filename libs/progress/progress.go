// Package progress lets a long-running loop say whether it can make
// progress, so that a process's readiness means "progressing" and not only
// "running" (R-L8).
//
// A loop reports Stalled when it hits a condition that waiting does not cure
// — a fenced static consumer-group member, a group session the broker
// refuses, a permanent client error — and Progressed as soon as it works
// again. An unreachable dependency is not a stall: the loop resumes by
// itself when the dependency returns, and what the process serves from
// other stores stays available meanwhile (R-N1). The process reports not
// ready while any loop is stalled, and a loop stalled longer than its limit
// ends its service with an error so that the supervisor restarts the
// process.
package progress

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/clock"
)

// ErrStalled is wrapped by Err and Exceeded.
var ErrStalled = errors.New("loop stalled")

// Tracker is one loop's progress. The zero value is not usable; create it
// with New. All methods are safe for concurrent use.
type Tracker struct {
	name  string
	clock clock.Clock

	mu     sync.Mutex
	since  time.Time // zero while progressing
	cause  error
	stalls int64
}

// New returns the tracker of the loop name, progressing.
func New(name string, clk clock.Clock) *Tracker {
	return &Tracker{name: name, clock: clk}
}

// Name is the loop's name.
func (t *Tracker) Name() string { return t.name }

// Progressed records that the loop works: it clears a stall.
func (t *Tracker) Progressed() {
	t.mu.Lock()
	t.since, t.cause = time.Time{}, nil
	t.mu.Unlock()
}

// Stalled records that the loop cannot make progress because of cause. A
// stall that continues keeps the time it began, so that its length is
// measured from the first report.
func (t *Tracker) Stalled(cause error) {
	t.mu.Lock()
	if t.since.IsZero() {
		t.since = t.clock.Now()
		t.stalls++
	}
	t.cause = cause
	t.mu.Unlock()
}

// Stalls counts the stalls that began since New.
func (t *Tracker) Stalls() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stalls
}

// StalledFor returns how long the loop has been stalled (0 while it
// progresses) and why.
func (t *Tracker) StalledFor() (time.Duration, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since.IsZero() {
		return 0, nil
	}
	return t.clock.Now().Sub(t.since), t.cause
}

// Err is nil while the loop progresses; otherwise it wraps ErrStalled with
// the loop's name, how long and why, for readiness answers.
func (t *Tracker) Err() error {
	d, cause := t.StalledFor()
	if cause == nil {
		return nil
	}
	return fmt.Errorf("%s: %w for %s: %w", t.name, ErrStalled, d.Truncate(time.Millisecond), cause)
}

// Exceeded is Err once the loop has been stalled for limit or longer, nil
// before; a loop returns it from its service to end the process.
func (t *Tracker) Exceeded(limit time.Duration) error {
	d, cause := t.StalledFor()
	if cause == nil || d < limit {
		return nil
	}
	return fmt.Errorf("%s: %w for %s, longer than the limit %s; ending so that the supervisor restarts the process: %w",
		t.name, ErrStalled, d.Truncate(time.Millisecond), limit, cause)
}

// Check joins the Err of every tracker: nil when all progress.
func Check(trackers ...*Tracker) error {
	var errs []error
	for _, t := range trackers {
		if t != nil {
			errs = append(errs, t.Err())
		}
	}
	return errors.Join(errs...)
}

// RegisterMetrics exports the trackers on meter (R-L8, R-N4):
// msgx_loop_stalled_seconds{loop}, how long each loop has been stalled (0
// while it progresses), and msgx_loop_stalls_total{loop}, the stalls that
// began.
func RegisterMetrics(meter metric.Meter, trackers ...*Tracker) error {
	stalled, err := meter.Float64ObservableGauge("msgx_loop_stalled_seconds", metric.WithUnit("s"),
		metric.WithDescription("how long a loop has been unable to make progress (fenced, refused by a broker); 0 while it progresses"))
	if err != nil {
		return fmt.Errorf("creating loop progress gauge: %w", err)
	}
	stalls, err := meter.Int64ObservableCounter("msgx_loop_stalls_total",
		metric.WithDescription("times a loop began to be unable to make progress"))
	if err != nil {
		return fmt.Errorf("creating loop stall counter: %w", err)
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, t := range trackers {
			attrs := metric.WithAttributes(attribute.String("loop", t.name))
			d, _ := t.StalledFor()
			o.ObserveFloat64(stalled, d.Seconds(), attrs)
			o.ObserveInt64(stalls, t.Stalls(), attrs)
		}
		return nil
	}, stalled, stalls)
	if err != nil {
		return fmt.Errorf("registering loop progress metrics: %w", err)
	}
	return nil
}
