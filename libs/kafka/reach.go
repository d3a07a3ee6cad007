package kafka

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/clock"
)

// DefaultUnreachableAfter is the default of Config.UnreachableAfter. A
// consumer's fetch is held by the broker up to franz-go's FetchMaxWait (5
// s) before it answers, so a healthy idle consumer waits that long for an
// answer; the bound leaves room above it and stays below the 10 s in
// which readiness must turn false when a dependency hangs (R-M1).
const DefaultUnreachableAfter = 8 * time.Second

// Reachability tells whether the brokers answer the clients built from a
// Config (ClientOpts). A service whose work is Kafka — the processor and
// the dispatcher, which serve nothing else — reports not-ready while a
// broker leaves its requests unanswered for longer than the bound (R-M2:
// readiness reflects an unreachable broker), without a ping of its own:
// the clients' own requests are the probe. A client that asks nothing
// (an idle producer, a standby without a term, a consumer whose buffer is
// full) is no evidence either way — a service whose clients idle probes
// them (Probe); a client that asked and heard nothing
// for the bound, whether its requests hang in a black hole or its
// connections are refused, is. The services that serve something without
// Kafka (the projector's flight list, ingest's compat entry) do not use it
// (R-N1).
type Reachability struct {
	clk   clock.Clock
	after time.Duration

	mu      sync.Mutex
	clients map[*reachHook]struct{}
}

// NewReachability returns a Reachability that calls a client unanswered
// after the given bound (DefaultUnreachableAfter when not positive).
func NewReachability(clk clock.Clock, after time.Duration) *Reachability {
	if after <= 0 {
		after = DefaultUnreachableAfter
	}
	return &Reachability{clk: clk, after: after, clients: map[*reachHook]struct{}{}}
}

// Ready returns an error naming a client that has asked the brokers
// something and heard no answer for longer than the bound.
func (r *Reachability) Ready() error {
	now := r.clk.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	for h := range r.clients {
		ok, asked := h.lastAnswer.Load(), h.lastAsked.Load()
		if silent := time.Duration(now - ok); asked > ok && silent > r.after {
			return fmt.Errorf("kafka: no broker answered client %s for %s (bound %s)", h.name, silent.Round(100*time.Millisecond), r.after)
		}
	}
	return nil
}

// hook returns the hook of one new client.
func (r *Reachability) hook(name string) kgo.Hook { return &reachHook{r: r, name: name} }

// reachHook follows one client: when it last heard an answer from a broker
// (or was created), and when it last asked (wrote a request, or failed to
// connect, write or read).
type reachHook struct {
	r          *Reachability
	name       string
	lastAnswer atomic.Int64 // unix nanoseconds
	lastAsked  atomic.Int64
}

var (
	_ kgo.HookNewClient     = (*reachHook)(nil)
	_ kgo.HookClientClosed  = (*reachHook)(nil)
	_ kgo.HookBrokerConnect = (*reachHook)(nil)
	_ kgo.HookBrokerWrite   = (*reachHook)(nil)
	_ kgo.HookBrokerRead    = (*reachHook)(nil)
)

func (h *reachHook) now() int64 { return h.r.clk.Now().UnixNano() }

func (h *reachHook) OnNewClient(*kgo.Client) {
	h.lastAnswer.Store(h.now())
	h.r.mu.Lock()
	h.r.clients[h] = struct{}{}
	h.r.mu.Unlock()
}

func (h *reachHook) OnClientClosed(*kgo.Client) {
	h.r.mu.Lock()
	delete(h.r.clients, h)
	h.r.mu.Unlock()
}

func (h *reachHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.lastAsked.Store(h.now())
	}
}

func (h *reachHook) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, _ error) {
	h.lastAsked.Store(h.now())
}

func (h *reachHook) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		h.lastAsked.Store(h.now())
		return
	}
	h.lastAnswer.Store(h.now())
}

// Probe asks the brokers something small (an ApiVersions request,
// kgo.Client.Ping) every interval until ctx ends, so that a client that
// would otherwise ask nothing for a while is evidence for Reachability
// too. The dispatcher's producers are idle between bursts: without a
// probe, an idle dispatcher whose brokers hang or are gone reported ready
// (R-M1: readiness false within 10 s of a hang; R-M2). A probe waits for
// its answer at most until the next one, and the hooks of the client see
// its request written and no answer read, as for any other request.
func Probe(ctx context.Context, cl *kgo.Client, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		_ = cl.Ping(pctx) // the answer, or its absence, is what the hooks record
		cancel()
	}
}

// ProbeInterval is how often Probe asks: well inside DefaultUnreachableAfter,
// so that a hang turns readiness false within about that bound.
const ProbeInterval = 2 * time.Second
