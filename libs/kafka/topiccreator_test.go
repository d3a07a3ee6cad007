package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/private"
)

// TestTopicCreator_R_N1_StartsWithoutBrokerAndCreatesTopicsLater starts the
// creator while no broker listens: it is Running at once (the process
// serves), and once a broker comes up on the address the topics appear
// without a restart.
func TestTopicCreator_R_N1_StartsWithoutBrokerAndCreatesTopicsLater(t *testing.T) {
	t.Parallel()
	port := private.ReservePort(t)
	cfg := kafkatest.DefaultConfig()
	cfg.Brokers = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.DialTimeout = 200 * time.Millisecond
	var names []string
	for _, s := range cfg.Specs() {
		names = append(names, s.Name)
	}
	tc := kafka.NewTopicCreator(cfg, names, slog.New(slog.DiscardHandler), 20*time.Millisecond, 200*time.Millisecond)
	svc := tc.Service()
	mgr := lifecycle.NewManager(slog.New(slog.DiscardHandler), svc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { return mgr.Ready() == nil }, 10*time.Second, 10*time.Millisecond)
	require.False(t, tc.Created())

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	require.Eventually(t, tc.Created, 30*time.Second, 20*time.Millisecond)

	cl, err := kgo.NewClient(cfg.ClientOpts(slog.New(slog.DiscardHandler), "t")...)
	require.NoError(t, err)
	defer cl.Close()
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer lcancel()
	details, err := kadm.NewClient(cl).ListTopics(lctx)
	require.NoError(t, err)
	for _, s := range cfg.Specs() {
		require.Contains(t, details, s.Name)
	}
}
