package kafka_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// topicConfigs returns the configs of topic as the broker describes them.
func topicConfigs(t *testing.T, cl *kgo.Client, topic string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	require.NoError(t, err)
	require.Len(t, rcs, 1)
	require.NoError(t, rcs[0].Err)
	out := map[string]string{}
	for _, c := range rcs[0].Configs {
		out[c.Key] = c.MaybeValue()
	}
	return out
}

// TestEnsureTopics_R_I3_SchdIsCreatedCompacted: the CreateTopics request
// for schd carries cleanup.policy=compact and the tombstone retention, and
// the broker then describes the topic so; flight-state stays compacted and
// msg, an event stream, is not.
func TestEnsureTopics_R_I3_SchdIsCreatedCompacted(t *testing.T) {
	t.Parallel()
	cfg := kafkatest.DefaultConfig()
	c := kafkatest.NewCluster(t, nil)
	cfg.Brokers = c.Brokers
	sent := make(chan map[string]string, 16)
	c.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.CreateTopicsRequest).Topics {
			if tp.Topic != cfg.Topics.Schd {
				continue
			}
			got := map[string]string{}
			for _, cf := range tp.Configs {
				if cf.Value != nil {
					got[cf.Name] = *cf.Value
				}
			}
			sent <- got
		}
		return nil, nil, false // the broker handles the request as usual
	})
	kafkatest.EnsureTopics(t, &cfg)

	week := "604800000"
	require.Equal(t, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": week}, <-sent)

	cl, err := kgo.NewClient(cfg.ClientOpts(slog.New(slog.DiscardHandler), "t")...)
	require.NoError(t, err)
	defer cl.Close()
	schd := topicConfigs(t, cl, cfg.Topics.Schd)
	require.Equal(t, "compact", schd["cleanup.policy"])
	require.Equal(t, week, schd["delete.retention.ms"])
	require.Equal(t, "compact", topicConfigs(t, cl, cfg.Topics.FlightState)["cleanup.policy"])
	require.NotEqual(t, "compact", topicConfigs(t, cl, cfg.Topics.Msg)["cleanup.policy"], "msg keeps every event")
}

// TestEnsureTopics_R_I3_ExistingSchdBecomesCompacted: a schd topic created
// before it was compacted (a site upgrading) is set to compact at the next
// start; a config the contract does not rest on (here the tombstone
// retention an operator chose) is left as it is, and a second run changes
// nothing.
func TestEnsureTopics_R_I3_ExistingSchdBecomesCompacted(t *testing.T) {
	t.Parallel()
	cfg := kafkatest.DefaultConfig()
	c := kafkatest.NewCluster(t, nil)
	cfg.Brokers = c.Brokers
	cl, err := kgo.NewClient(cfg.ClientOpts(slog.New(slog.DiscardHandler), "t")...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	del, hour := "delete", "3600000"
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, cfg.Partitions, 1,
		map[string]*string{"cleanup.policy": &del, "delete.retention.ms": &hour}, cfg.Topics.Schd)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	require.Equal(t, "delete", topicConfigs(t, cl, cfg.Topics.Schd)["cleanup.policy"])

	kafkatest.EnsureTopics(t, &cfg)
	schd := topicConfigs(t, cl, cfg.Topics.Schd)
	require.Equal(t, "compact", schd["cleanup.policy"])
	require.Equal(t, hour, schd["delete.retention.ms"], "operator tuning is kept")

	alters := make(chan struct{}, 16)
	c.ControlKey(int16(kmsg.IncrementalAlterConfigs), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		alters <- struct{}{}
		return nil, nil, false
	})
	kafkatest.EnsureTopics(t, &cfg)
	require.Empty(t, alters, "nothing to set on a compliant topic")
	require.Equal(t, "compact", topicConfigs(t, cl, cfg.Topics.Schd)["cleanup.policy"])
}
