package pipeline

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
)

// TestBrokerLoss_R_M1_StoredPositionPastTheEndIsReadAgainAndReported: the
// broker lost acknowledged records of the inbox (an unclean leader
// election, a restored broker), so the position the processor stored lies
// past the partition's end, and the offsets it already read are handed out
// to new records. The inbox consumer reads the partition again from its
// start — the new records at offsets below the stored position are
// registered, not skipped — and reports the loss: an ERROR naming the
// alert and msgx_processor_broker_lost_records_total. The whole path with
// a broker whose data directory is put back is
// TestBroker_R_M1_RestoredDataDirLosesTheAcknowledgedTail (the harness).
func TestBrokerLoss_R_M1_StoredPositionPastTheEndIsReadAgainAndReported(t *testing.T) {
	t.Parallel()
	kcfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &kcfg)
	h, reader, logs := lossHarness(t, kcfg)
	// Before the loss the processor had read ten records: its stored
	// position is 10. After it the partition holds three new records.
	h.exec(`INSERT INTO consumer_offset (consumer, topic, partition, next_offset) VALUES ($1, $2, 0, 10)`, h.e.opt.ConsumerName, kcfg.Topics.Inbox)
	for id := int64(101); id <= 103; id++ {
		produceInbox(t, kcfg, id, refMsg(id, "GLST", "ADD", glst("G"+strconv.FormatInt(id, 10), "x")))
	}

	stop := runInbox(t, h)

	require.Eventually(t, func() bool { return h.count(`SELECT count(*) FROM proc_state WHERE msg_id BETWEEN 101 AND 103`) == 3 }, 20*time.Second, 10*time.Millisecond,
		"the records at offsets below the stored position are new ones: registered, not skipped")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM consumer_offset WHERE topic = $1 AND next_offset = 3`, kcfg.Topics.Inbox),
		"the stored position follows the partition again")
	require.Equal(t, int64(1), counterValue(t, reader, "msgx_processor_broker_lost_records_total", "topic", kcfg.Topics.Inbox))
	require.Contains(t, logs.String(), `"alert":"broker-lost-records"`)
	require.Contains(t, logs.String(), "the stored position 10 lies past the partition's end offset 3")

	// A position within the partition is no loss.
	require.NoError(t, stop())
	runInbox(t, h)
	produceInbox(t, kcfg, 104, refMsg(104, "GLST", "ADD", glst("G104", "x")))
	require.Eventually(t, func() bool { return h.count(`SELECT count(*) FROM proc_state WHERE msg_id = 104`) == 1 }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(1), counterValue(t, reader, "msgx_processor_broker_lost_records_total", "topic", kcfg.Topics.Inbox))
}

// lossHarness is a harness on the broker of kcfg whose metrics and logs
// (JSON, from INFO) the test reads.
func lossHarness(t *testing.T, kcfg kafka.Config) (*harness, *sdkmetric.ManualReader, *testutil.LogBuffer) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	logs := &testutil.LogBuffer{}
	h := newHarness(t, func(o *Options) {
		o.Kafka = kcfg
		o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	return h, reader, logs
}

// runInbox runs h's inbox consumer until the returned stop.
func runInbox(t *testing.T, h *harness) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.NewManager(h.e.log, h.e.inboxService()).Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestBrokerLoss_R_M1_AnEpochThatEndedBeforeThePositionIsReadFromTheDivergence:
// the broker lost inbox records the processor had read (an unclean leader
// election), and the producers wrote past the old end before the
// processor looked: its stored position 3 lies within the partition
// again, and the records at offsets 1 and 2 are new ones. The offset
// alone cannot tell; the leader epoch stored with it can. The consumer
// asks the leader where epoch 0 ended — at offset 1, the leader answers
// (an answer kfake, which keeps epoch 0 across every restart, is made to
// give here) — and reads again from there, reporting the loss: the new
// records below the stored position are registered, not skipped.
func TestBrokerLoss_R_M1_AnEpochThatEndedBeforeThePositionIsReadFromTheDivergence(t *testing.T) {
	t.Parallel()
	kcfg := kafkatest.DefaultConfig()
	cluster := kafkatest.NewCluster(t, &kcfg)
	h, reader, logs := lossHarness(t, kcfg)
	for id := int64(101); id <= 105; id++ {
		produceInbox(t, kcfg, id, refMsg(id, "GLST", "ADD", glst("G"+strconv.FormatInt(id, 10), "x")))
	}
	h.exec(`INSERT INTO consumer_offset (consumer, topic, partition, next_offset, leader_epoch, epoch_next_offset) VALUES ($1, $2, 0, 3, 0, 3)`,
		h.e.opt.ConsumerName, kcfg.Topics.Inbox)
	var asked atomic.Int32
	cluster.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		ereq := req.(*kmsg.OffsetForLeaderEpochRequest)
		resp := ereq.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range ereq.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, 0, 1
				if rp.LeaderEpoch == 0 {
					asked.Add(1)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	runInbox(t, h)

	require.Eventually(t, func() bool { return h.count(`SELECT count(*) FROM proc_state WHERE msg_id BETWEEN 102 AND 105`) == 4 }, 20*time.Second, 10*time.Millisecond,
		"the records from the divergence on are new ones: registered, not skipped")
	require.EqualValues(t, 1, asked.Load(), "the position's epoch was asked about")
	require.Equal(t, int64(1), counterValue(t, reader, "msgx_processor_broker_lost_records_total", "topic", kcfg.Topics.Inbox))
	require.Contains(t, logs.String(), `"alert":"broker-lost-records"`)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM consumer_offset WHERE topic = $1 AND next_offset = 5 AND leader_epoch = 0 AND epoch_next_offset = 5`, kcfg.Topics.Inbox),
		"the position is stored with its epoch")
}

// TestBrokerLoss_R_M1_AnEpochStoredWithAnotherPositionIsNotUsed: the
// previous release, during a rolling upgrade, moved the position without
// knowing the epoch column; the epoch stored with the older position is
// not asked about for the new one.
func TestBrokerLoss_R_M1_AnEpochStoredWithAnotherPositionIsNotUsed(t *testing.T) {
	t.Parallel()
	kcfg := kafkatest.DefaultConfig()
	cluster := kafkatest.NewCluster(t, &kcfg)
	h := newHarness(t, func(o *Options) { o.Kafka = kcfg })
	for id := int64(101); id <= 105; id++ {
		produceInbox(t, kcfg, id, refMsg(id, "GLST", "ADD", glst("G"+strconv.FormatInt(id, 10), "x")))
	}
	h.exec(`INSERT INTO consumer_offset (consumer, topic, partition, next_offset, leader_epoch, epoch_next_offset) VALUES ($1, $2, 0, 3, 0, 1)`,
		h.e.opt.ConsumerName, kcfg.Topics.Inbox)
	var asked atomic.Int32
	cluster.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		asked.Add(1)
		return nil, nil, false
	})
	runInbox(t, h)
	require.Eventually(t, func() bool { return h.count(`SELECT count(*) FROM proc_state WHERE msg_id BETWEEN 104 AND 105`) == 2 }, 20*time.Second, 10*time.Millisecond)
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE msg_id < 104`), "resumed at the position")
	require.Zero(t, asked.Load(), "no epoch was asked about")
}

// TestBrokerLoss_R_M1_DataLossInAFetchIsReported: a consumer that was
// reading when the broker lost records learns it from franz-go's
// *kgo.ErrDataLoss in a fetch (the client resumes by its reset rule); the
// processor reports it like a stored position past the end, and does not
// count it as an unreachable broker's warning.
func TestBrokerLoss_R_M1_DataLossInAFetchIsReported(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	var logs testutil.LogBuffer
	h := newHarness(t, func(o *Options) {
		o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	const topic = "msgx.projection-acks"
	loss := &kgo.ErrDataLoss{Topic: topic, Partition: 2, ConsumedTo: 40, ResetTo: 31}
	fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{{Partition: 2, Err: loss}}}}}}
	require.NoError(t, h.e.polled(context.Background(), h.e.loopProgress[1], kafka.NewPollWait(), fetches))
	require.Equal(t, int64(1), counterValue(t, reader, "msgx_processor_broker_lost_records_total", "topic", topic))
	require.Contains(t, logs.String(), `"alert":"broker-lost-records"`)
	require.Contains(t, logs.String(), "consumed to offset 40 epoch 0 but was reset to offset 31")
	require.NotContains(t, logs.String(), `"level":"WARN"`)
}
