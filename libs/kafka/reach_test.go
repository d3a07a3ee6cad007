package kafka_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/private"
)

// TestReachability_R_M2_BrokerKilledIsUnreachableAndRestartedReachable:
// a consumer built from ClientOpts polls a broker; while the broker
// answers, Ready is nil. The broker is killed: Ready fails within the
// bound (and a little more for the client's own attempts), naming the
// client, while a client that asks nothing does not count. The broker
// restarts on its port: Ready is nil again, without the client being
// rebuilt.
func TestReachability_R_M2_BrokerKilledIsUnreachableAndRestartedReachable(t *testing.T) {
	t.Parallel()
	port := private.ReservePort(t)
	start := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(1, "reach"))
		require.NoError(t, err)
		return c
	}
	broker := start()
	defer func() {
		if broker != nil {
			broker.Close()
		}
	}()

	const bound = time.Second
	cfg := kafkatest.DefaultConfig()
	cfg.Brokers = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.DialTimeout = 200 * time.Millisecond
	cfg.Reach = kafka.NewReachability(clock.Real{}, bound)
	log := slog.New(slog.DiscardHandler)

	consumer, err := kgo.NewClient(append(cfg.ClientOpts(log, "reach-consumer"), kgo.ConsumeTopics("reach"))...)
	require.NoError(t, err)
	consumerOpen := true
	defer func() {
		if consumerOpen {
			consumer.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			consumer.PollFetches(ctx)
		}
	}()
	stopPolling := func() { cancel(); <-polled }
	defer stopPolling()

	// An idle client: it asks nothing, so the outage says nothing about it.
	idle, err := kgo.NewClient(cfg.ClientOpts(log, "reach-idle")...)
	require.NoError(t, err)
	defer idle.Close()

	// While the broker answers, the consumer's fetches (held at most half
	// the bound) keep it reachable.
	require.Eventually(t, func() bool { return cfg.Reach.Ready() == nil }, 10*time.Second, 20*time.Millisecond)
	require.Never(t, func() bool { return cfg.Reach.Ready() != nil }, 3*bound, 20*time.Millisecond, "the broker answers")

	broker.Close()
	killed := time.Now()
	var notReady error
	require.Eventually(t, func() bool {
		notReady = cfg.Reach.Ready()
		return notReady != nil
	}, 10*bound, 20*time.Millisecond, "not-ready within the bound after the broker died")
	t.Logf("unreachable after %s: %v", time.Since(killed).Round(10*time.Millisecond), notReady)
	require.ErrorContains(t, notReady, "reach-consumer")
	require.NotContains(t, notReady.Error(), "reach-idle")

	broker = start()
	require.Eventually(t, func() bool { return cfg.Reach.Ready() == nil }, 30*time.Second, 20*time.Millisecond,
		"reachable again once the broker answers on its port")

	// A closed client no longer counts, whatever it last asked.
	broker.Close()
	broker = nil
	require.Eventually(t, func() bool { return cfg.Reach.Ready() != nil }, 10*bound, 20*time.Millisecond)
	stopPolling()
	consumer.Close()
	consumerOpen = false
	require.NoError(t, cfg.Reach.Ready(), "only closed or idle clients left")
}

// TestReachability_R_M1_ProbedIdleClientCountsWhenTheBrokerHangs: behind
// an address that accepts connections and never answers (a hung broker),
// a client that asks nothing stays ready, while the same idle client
// probed (Probe) turns unreachable within the bound: its probes are
// written and never answered.
func TestReachability_R_M1_ProbedIdleClientCountsWhenTheBrokerHangs(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() }()
		}
	}()
	const bound = 500 * time.Millisecond
	log := slog.New(slog.DiscardHandler)
	client := func(name string) (*kgo.Client, *kafka.Reachability) {
		cfg := kafkatest.DefaultConfig()
		cfg.Brokers = ln.Addr().String()
		cfg.Reach = kafka.NewReachability(clock.Real{}, bound)
		cl, err := kgo.NewClient(cfg.ClientOpts(log, name)...)
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl, cfg.Reach
	}
	_, idleReach := client("reach-idle")
	probed, probedReach := client("reach-probed")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); kafka.Probe(ctx, probed, 100*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	var notReady error
	require.Eventually(t, func() bool {
		notReady = probedReach.Ready()
		return notReady != nil
	}, 10*bound, 20*time.Millisecond, "the probed client is unreachable within the bound")
	require.ErrorContains(t, notReady, "reach-probed")
	require.NoError(t, idleReach.Ready(), "an idle client that is not probed asks nothing")
}
