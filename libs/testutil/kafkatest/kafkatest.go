// Package kafkatest starts franz-go's in-process Kafka-protocol broker
// (kfake) on a loopback TCP port for one test, with every topic of the
// system created by the same code production uses.
package kafkatest

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil/faultproxy"
)

// Cluster is a running test broker.
type Cluster struct {
	*kfake.Cluster
	Brokers string
}

// NewCluster starts a one-node broker listening on 127.0.0.1, creates the
// topics of cfg (cfg.Brokers is set to the broker's address) and closes it
// when the test ends. Extra kfake options (DataDir, Ports) may be given.
func NewCluster(t testing.TB, cfg *kafka.Config, opts ...kfake.Opt) *Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("starting kafka-protocol broker: %v", err)
	}
	t.Cleanup(c.Close)
	cl := &Cluster{Cluster: c, Brokers: strings.Join(c.ListenAddrs(), ",")}
	if cfg != nil {
		cfg.Brokers = cl.Brokers
		EnsureTopics(t, cfg)
	}
	return cl
}

// NewClusterBehind starts NewCluster's broker behind a TCP fault proxy
// that it advertises, so that every connection of a client — the
// bootstrap and those to the addresses the broker names — goes through
// the proxy, and Proxy.Down is a broker outage that keeps the broker's
// topics, records and groups (cfg.Brokers is the proxy's address).
func NewClusterBehind(t testing.TB, cfg *kafka.Config, opts ...kfake.Opt) (*Cluster, *faultproxy.Proxy) {
	t.Helper()
	var proxy *faultproxy.Proxy
	listen := kfake.ListenFn(func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		proxy = faultproxy.New(t, "127.0.0.1:0", ln.Addr().String())
		addr, err := net.ResolveTCPAddr("tcp", proxy.Addr())
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		return advertised{Listener: ln, addr: addr}, nil
	})
	c := NewCluster(t, cfg, append([]kfake.Opt{listen}, opts...)...)
	return c, proxy
}

// advertised is a listener that names another address than its own: the
// broker advertises what its listener's Addr says.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

// EnsureTopics creates the system's topics on cfg.Brokers.
func EnsureTopics(t testing.TB, cfg *kafka.Config) {
	t.Helper()
	client, err := kgo.NewClient(cfg.ClientOpts(slog.New(slog.DiscardHandler), "test-admin")...)
	if err != nil {
		t.Fatalf("creating kafka client: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, client, cfg.ReplicationFactor, cfg.Specs()); err != nil {
		t.Fatalf("creating topics: %v", err)
	}
}

// DefaultConfig returns the kafka.Config with its flag defaults.
func DefaultConfig() kafka.Config {
	var c kafka.Config
	fs := newFlagSet()
	c.RegisterFlags("kafka.", fs)
	return c
}
