package pipeline

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
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
	reader := sdkmetric.NewManualReader()
	var logs testutil.LogBuffer
	h := newHarness(t, func(o *Options) {
		o.Kafka = kcfg
		o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	// Before the loss the processor had read ten records: its stored
	// position is 10. After it the partition holds three new records.
	h.exec(`INSERT INTO consumer_offset (consumer, topic, partition, next_offset) VALUES ($1, $2, 0, 10)`, h.e.opt.ConsumerName, kcfg.Topics.Inbox)
	for id := int64(101); id <= 103; id++ {
		produceInbox(t, kcfg, id, refMsg(id, "GLST", "ADD", glst("G"+strconv.FormatInt(id, 10), "x")))
	}

	// run runs the inbox consumer until the returned stop.
	run := func() (stop func() error) {
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
	stop := run()

	require.Eventually(t, func() bool { return h.count(`SELECT count(*) FROM proc_state WHERE msg_id BETWEEN 101 AND 103`) == 3 }, 20*time.Second, 10*time.Millisecond,
		"the records at offsets below the stored position are new ones: registered, not skipped")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM consumer_offset WHERE topic = $1 AND next_offset = 3`, kcfg.Topics.Inbox),
		"the stored position follows the partition again")
	require.Equal(t, int64(1), counterValue(t, reader, "msgx_processor_broker_lost_records_total", "topic", kcfg.Topics.Inbox))
	require.Contains(t, logs.String(), `"alert":"broker-lost-records"`)
	require.Contains(t, logs.String(), "the stored position 10 lies past the partition's end offset 3")

	// A position within the partition is no loss.
	require.NoError(t, stop())
	run()
	produceInbox(t, kcfg, 104, refMsg(104, "GLST", "ADD", glst("G104", "x")))
	require.Eventually(t, func() bool { return h.count(`SELECT count(*) FROM proc_state WHERE msg_id = 104`) == 1 }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(1), counterValue(t, reader, "msgx_processor_broker_lost_records_total", "topic", kcfg.Topics.Inbox))
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
