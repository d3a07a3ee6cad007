// Package faultproxy puts a TCP fault proxy in front of a dependency for
// one test: the test's clients connect to the proxy, and the test makes
// the path slow, narrow, silent or hostile while they run (R-M1, R-M2).
//
// It runs Shopify's toxiproxy in-process as a library — no daemon, no HTTP
// API — so that a test starts and removes its proxies itself and fails, not
// skips, when something is wrong with them. The faults are toxiproxy's
// toxics: latency, bandwidth, timeout (a black hole: nothing goes through
// and, with timeout 0, nothing is closed while it lasts; its removal closes
// every connection it held) and reset_peer (connections reset), and a toxic
// of its own, the strand (strand.go): a black hole whose connections stay
// open and silent after it, which only a client's own deadline ends. Each
// applies to data in both directions unless said otherwise.
package faultproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxy is one TCP proxy from a loopback address to an upstream address.
type Proxy struct {
	name string
	p    *toxiproxy.Proxy
	seq  atomic.Int64
}

var proxies atomic.Int64

// Some toxics (bandwidth) log through zerolog's global logger, at trace
// level, onto the test's output; nothing else in the tests uses zerolog.
func init() { zerolog.SetGlobalLevel(zerolog.Disabled) }

// New starts a proxy to upstream (host:port) on listen (host:port; use
// "127.0.0.1:0" for any free port, or a reserved port when the address
// must survive the proxy's restart). It stops when the test ends.
func New(t testing.TB, listen, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	name := fmt.Sprintf("proxy-%d", proxies.Add(1))
	p := toxiproxy.NewProxy(srv, name, listen, upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("starting the fault proxy %s → %s: %v", listen, upstream, err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{name: name, p: p}
}

// SetUpstream points the proxy at another upstream address (a server that
// had to move to another port); connections made before keep theirs.
func (p *Proxy) SetUpstream(upstream string) error {
	in := &toxiproxy.Proxy{Name: p.name, Listen: p.p.Listen, Upstream: upstream, Enabled: true}
	if err := p.p.Update(in); err != nil {
		return fmt.Errorf("pointing %s at %s: %w", p.name, upstream, err)
	}
	return nil
}

// Addr is where clients connect (host:port).
func (p *Proxy) Addr() string { return p.p.Listen }

// Port is Addr's port.
func (p *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(p.p.Listen)
	var n int
	_, _ = fmt.Sscan(port, &n)
	return n
}

// Fault is one toxic in force until removed.
type Fault struct {
	p      *Proxy
	names  []string
	strand bool // a StrandFault: Remove heals it and keeps its toxics
}

// Remove ends the fault; data flows normally again (the connections a
// reset or a black hole ended stay ended). A StrandFault's connections
// stay silent: only connections that carry data after Remove pass.
func (f *Fault) Remove() {
	for _, n := range f.names {
		if f.strand {
			if w := f.p.p.Toxics.GetToxic(n); w != nil {
				if st, ok := w.Toxic.(*strandToxic); ok {
					st.healed.Store(true)
				}
			}
			continue
		}
		_ = f.p.p.Toxics.RemoveToxic(context.Background(), n)
	}
}

// add adds a toxic of kind with attributes to the given streams
// ("upstream": client to server; "downstream": server to client).
func (p *Proxy) add(kind string, attrs map[string]any, streams ...string) (*Fault, error) {
	f := &Fault{p: p}
	for _, s := range streams {
		name := fmt.Sprintf("%s-%s-%d", kind, s, p.seq.Add(1))
		body, err := json.Marshal(map[string]any{"name": name, "type": kind, "stream": s, "toxicity": 1.0, "attributes": attrs})
		if err != nil {
			return nil, err
		}
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
			f.Remove()
			return nil, fmt.Errorf("adding %s toxic to %s: %w", kind, p.name, err)
		}
		f.names = append(f.names, name)
	}
	return f, nil
}

func (p *Proxy) must(t testing.TB, f *Fault, err error) *Fault {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Remove)
	return f
}

// Latency adds rtt to every round trip: each chunk of data is delayed by
// rtt/2 in each direction, ± jitter/2. It is removed when the test ends.
func (p *Proxy) Latency(t testing.TB, rtt, jitter time.Duration) *Fault {
	t.Helper()
	f, err := p.LatencyFault(rtt, jitter)
	return p.must(t, f, err)
}

// LatencyFault is Latency for callers that remove the fault themselves.
func (p *Proxy) LatencyFault(rtt, jitter time.Duration) (*Fault, error) {
	return p.add("latency", map[string]any{"latency": (rtt / 2).Milliseconds(), "jitter": (jitter / 2).Milliseconds()}, "upstream", "downstream")
}

// BandwidthFault limits each direction to kbps kilobytes per second.
func (p *Proxy) BandwidthFault(kbps int64) (*Fault, error) {
	return p.add("bandwidth", map[string]any{"rate": kbps}, "upstream", "downstream")
}

// BlackHoleFault stops all data in both directions without closing
// anything: the connections and new ones hang, as behind a silently
// dropping firewall or a frozen server.
func (p *Proxy) BlackHoleFault() (*Fault, error) {
	return p.add("timeout", map[string]any{"timeout": 0}, "upstream", "downstream")
}

// StrandFault stops all data in both directions without closing
// anything, as BlackHoleFault does, but strands for good every connection
// that carried data while it was in force: after Remove those stay open
// and silent until the test ends (a failover behind an address that
// silently drops the old connections, a NAT entry lost), and only the
// others and new connections carry data. A client call on a stranded
// connection returns only by its own deadline.
func (p *Proxy) StrandFault() (*Fault, error) {
	f, err := p.add(strandType, map[string]any{}, "upstream", "downstream")
	if f != nil {
		f.strand = true
	}
	return f, err
}

// ResetFault resets every connection (TCP RST) as soon as data flows on
// it, new ones included, until removed.
func (p *Proxy) ResetFault() (*Fault, error) {
	return p.add("reset_peer", map[string]any{"timeout": 0}, "upstream")
}

// Down takes the path down as a stopped server would be: the proxy stops
// listening (new connections are refused) and closes every connection it
// carries. Up listens again on the same address.
func (p *Proxy) Down() { p.p.Stop() }

// Up ends Down: new connections reach the upstream again.
func (p *Proxy) Up() error {
	if err := p.p.Start(); err != nil {
		return fmt.Errorf("starting %s again on %s: %w", p.name, p.p.Listen, err)
	}
	return nil
}
