package lease

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// holding is what msgx_lease_held reports: for every lease this process
// runs an Elector.Run for, whether it holds it now. A name is reported from
// the moment Run starts (0: standby) until Run returns, so a process that
// competes for a lease always says whether it holds it, and the sum over
// all processes of one lease is 1 while it has a holder — 0 for longer than
// a takeover (TTL + Retry) means nobody runs the single-active component.
type holding struct {
	mu     sync.Mutex
	runs   map[string]int // Run calls in progress, by lease
	active map[string]int // terms in progress, by lease
}

func newHolding() *holding {
	return &holding{runs: map[string]int{}, active: map[string]int{}}
}

// register creates msgx_lease_held{lease} on meter.
func (h *holding) register(meter metric.Meter) error {
	g, err := meter.Int64ObservableGauge("msgx_lease_held",
		metric.WithDescription("1 while this process holds the lease, 0 while it is standby for it, by lease; summed over the processes, 0 means the lease has no holder."))
	if err != nil {
		return fmt.Errorf("creating lease gauge: %w", err)
	}
	if _, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		for name := range h.runs {
			o.ObserveInt64(g, int64(min(h.active[name], 1)), metric.WithAttributes(attribute.String("lease", name)))
		}
		return nil
	}, g); err != nil {
		return fmt.Errorf("registering lease gauge: %w", err)
	}
	return nil
}

// run counts a Run of name from now until the returned function is called.
func (h *holding) run(name string) (done func()) {
	h.mu.Lock()
	h.runs[name]++
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.runs[name]--; h.runs[name] <= 0 {
			delete(h.runs, name)
		}
	}
}

// hold counts a term of name from now until the returned function is
// called.
func (h *holding) hold(name string) (done func()) {
	h.mu.Lock()
	h.active[name]++
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.active[name]--; h.active[name] <= 0 {
			delete(h.active, name)
		}
	}
}

// running is the number of Run calls in progress.
func (h *holding) running() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.runs {
		n += c
	}
	return n
}
