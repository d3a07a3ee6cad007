package kafka_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil/kafkatest"
)

// TestEnsureTopicsIsIdempotent checks that topic creation is one piece of
// code that can run in every environment, any number of times.
func TestEnsureTopicsIsIdempotent(t *testing.T) {
	t.Parallel()
	cfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &cfg)
	kafkatest.EnsureTopics(t, &cfg) // second time: already exists is fine

	cl, err := kgo.NewClient(cfg.ClientOpts(slog.New(slog.DiscardHandler), "t")...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, details[cfg.Topics.Inbox].Partitions, 1, "the inbox must have exactly one partition (FIFO)")
	require.Len(t, details[cfg.Topics.Msg].Partitions, int(cfg.Partitions))
	require.Len(t, details[cfg.Topics.ProjectionControl].Partitions, 1, "rebuild manifests are handled one at a time, in order (R-E4)")
	for _, s := range cfg.Specs() {
		require.Contains(t, details, s.Name)
	}
	_ = kafka.TopicSpec{}
}
