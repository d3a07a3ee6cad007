package pipeline

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
	"msgexchange/libs/testutil/kafkatest"
)

// refuseFetches makes the broker answer TOPIC_AUTHORIZATION_FAILED to every
// fetch of topic while refusing is set: a permanent refusal, as when the
// processor's principal lost its ACL.
func refuseFetches(c *kfake.Cluster, topic string, refusing *atomic.Bool) {
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fr := req.(*kmsg.FetchRequest)
		if !refusing.Load() {
			return nil, nil, false
		}
		resp := fr.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range fr.Topics {
			if rt.Topic != "" && rt.Topic != topic {
				return nil, nil, false
			}
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition = rp.Partition
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
}

// TestProgress_R_L8_RefusedInboxMakesTheProcessorNotReadyThenEndsIt: the
// broker refuses the processor's inbox fetches (an authorization failure,
// which waiting does not cure). The inbox loop is alive but makes no
// progress: the processor reports it stalled — not ready, naming the loop
// — within seconds, and ready again once the broker serves it. Refused
// again for StallLimit (on the engine's clock), the loop's service ends
// with the stall, so that the supervisor restarts the process. An
// unreachable broker is not a stall (the loops resume by themselves).
func TestProgress_R_L8_RefusedInboxMakesTheProcessorNotReadyThenEndsIt(t *testing.T) {
	t.Parallel()
	kcfg := kafkatest.DefaultConfig()
	cluster := kafkatest.NewCluster(t, &kcfg)
	var refusing atomic.Bool
	refusing.Store(true)
	refuseFetches(cluster.Cluster, kcfg.Topics.Inbox, &refusing)
	h := newHarness(t, func(o *Options) { o.Kafka = kcfg; o.StallLimit = time.Minute })

	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { done <- lifecycle.NewManager(h.e.log, h.e.inboxService()).Run(ctx) }()

	start := time.Now()
	require.Eventually(t, func() bool { return errors.Is(h.e.Progress(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond,
		"a refused inbox loop makes the processor not ready within 10 s")
	require.ErrorContains(t, h.e.Progress(), "processor-inbox")
	t.Logf("not ready %s after the start: %v", time.Since(start).Round(time.Millisecond), h.e.Progress())

	refusing.Store(false)
	require.Eventually(t, func() bool { return h.e.Progress() == nil }, 10*time.Second, 10*time.Millisecond,
		"served again, the loop progresses")
	produceInbox(t, kcfg, 1, refMsg(1, "GLST", "ADD", glst("G1", "a")))
	require.Eventually(t, func() bool { return h.count(`SELECT count(*) FROM proc_state WHERE msg_id = 1`) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the inbox is consumed again")

	refusing.Store(true)
	require.Eventually(t, func() bool { return errors.Is(h.e.Progress(), progress.ErrStalled) }, 10*time.Second, 10*time.Millisecond)
	h.clk.Advance(time.Minute)
	select {
	case err := <-done:
		require.ErrorIs(t, err, progress.ErrStalled, "the stalled loop ends its service")
		require.ErrorContains(t, err, "longer than the limit")
	case <-time.After(20 * time.Second):
		t.Fatal("a loop stalled past its limit did not end its service")
	}
}

// produceInbox writes raw as mailbox message id to the inbox topic.
func produceInbox(t *testing.T, kcfg kafka.Config, id int64, raw string) {
	t.Helper()
	cl, err := kgo.NewClient(append(kcfg.ClientOpts(testLogger(t, "producer"), "producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	defer cl.Close()
	rec := &kgo.Record{Topic: kcfg.Topics.Inbox, Partition: 0, Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(raw)}
	require.NoError(t, cl.ProduceSync(context.Background(), rec).FirstErr())
}
