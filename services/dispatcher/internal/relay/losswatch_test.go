package relay

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"msgexchange/libs/testutil"
)

// TestSentTail_R_M1_ALossIsDatedByItsFirstLostBatch: what a partition was
// acknowledged, compared with an end offset that moved back, dates the
// loss by the commit of the batch holding the first lost offset, reports
// it once, and forgets what was lost. A loss below every batch kept is
// dated "before" the oldest one.
func TestSentTail_R_M1_ALossIsDatedByItsFirstLostBatch(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return testNow.Add(time.Duration(s) * time.Second) }
	batch := func(p int32, offsets ...int64) kgo.ProduceResults {
		var out kgo.ProduceResults
		for _, o := range offsets {
			out = append(out, kgo.ProduceResult{Record: &kgo.Record{Partition: p, Offset: o}})
		}
		return out
	}
	var tail sentTail
	// Transactions: each batch's commit marker takes the offset after it.
	tail.committed(batch(0, 0, 1), at(1))
	tail.committed(batch(0, 3, 4, 5), at(2))
	tail.committed(append(batch(0, 7, 8), kgo.ProduceResult{Record: &kgo.Record{Partition: 0, Offset: 99}, Err: batchAbortedError{}}), at(3))
	tail.committed(batch(1, 0), at(3))

	require.Empty(t, tail.lost(map[int32]int64{0: 10, 1: 2}), "ends past what was acknowledged: nothing lost")
	require.Empty(t, tail.lost(map[int32]int64{0: 9}), "only the last commit marker is gone")
	require.Equal(t, []tailLoss{{partition: 0, end: 4, high: 8, since: at(2), exact: true}}, tail.lost(map[int32]int64{0: 4, 1: 2}),
		"offset 4 is in the second batch: lost from its commit on; a failed record is never counted")
	require.Empty(t, tail.lost(map[int32]int64{0: 4}), "one loss is reported once")

	tail.committed(batch(0, 4, 5), at(4))
	require.Equal(t, []tailLoss{{partition: 0, end: 3, high: 5, since: at(2), exact: true}}, tail.lost(map[int32]int64{0: 3}),
		"the second batch starts at offset 3: lost whole")
	require.Equal(t, []tailLoss{{partition: 0, end: 0, high: 2, since: at(1), exact: true}}, tail.lost(map[int32]int64{0: 0}))

	require.Empty(t, tail.committed(batch(0, 0, 1), at(6)), "offsets after what is remembered")
	require.Equal(t, []tailLoss{{partition: 0, end: 1, high: 1, since: at(6), exact: true}}, tail.committed(batch(0, 1, 2), at(7)),
		"a batch acknowledged at an offset acknowledged before: the broker handed it out again")

	var old sentTail
	require.Empty(t, old.committed(batch(2, 50, 51), at(5)))
	require.Equal(t, []tailLoss{{partition: 2, end: 20, high: 51, since: at(5)}}, old.lost(map[int32]int64{2: 20}),
		"the loss begins below every batch kept: dated before the oldest")
}

// TestKafkaRelay_R_M1_AcknowledgedRecordsTheBrokerLostAreReported: the
// msg target delivered its rows; then the broker's end offset of their
// partition falls below offsets it acknowledged (as after an unclean
// leader election; the broker here answers ListOffsets as such a broker
// would). The target's check reports the loss: an ERROR naming the alert,
// the time of the first lost batch and the command that sends the window
// again, and msgx_dispatcher_broker_lost_records_total{target}; once,
// and not while the end stays past what was acknowledged.
func TestKafkaRelay_R_M1_AcknowledgedRecordsTheBrokerLostAreReported(t *testing.T) {
	t.Parallel()
	b, logs, reader, cl := deliveredThree(t)
	topic := b.kcfg.Topics.Msg
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	require.NoError(t, b.r.checkLoss(ctx, adm, TargetMsg, topic))
	require.Zero(t, lostRecords(t, reader, TargetMsg), "the broker has every record it acknowledged")

	// The broker comes back with partition 0 ending at offset 0.
	b.cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.cluster.KeepControl()
		lreq := req.(*kmsg.ListOffsetsRequest)
		resp := lreq.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range lreq.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch = rp.Partition, 0, 0
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	require.NoError(t, b.r.checkLoss(ctx, adm, TargetMsg, topic))
	require.Equal(t, int64(1), lostRecords(t, reader, TargetMsg))
	require.Contains(t, logs.String(), `"alert":"broker-lost-records"`)
	require.Contains(t, logs.String(), `"lost_since":"`+testNow.Format(time.RFC3339Nano)+`"`)
	require.Contains(t, logs.String(), `"remedy":"msgxctl outbox resend --target msg --since `+testNow.Add(-time.Minute).Format(time.RFC3339)+`"`)

	require.NoError(t, b.r.checkLoss(ctx, adm, TargetMsg, topic))
	require.Equal(t, int64(1), lostRecords(t, reader, TargetMsg), "a loss is reported once")
}

// TestKafkaRelay_R_M1_ALostTailRefilledBeforeTheCheckIsReported: the
// broker lost what it acknowledged and hands the offsets out again, and
// the target's next batch takes them before the periodic check could see
// the end fall back (here the topic is deleted and created again, its
// offsets starting at 0). The batch itself shows the loss: a record
// acknowledged at an offset the target had been acknowledged before.
func TestKafkaRelay_R_M1_ALostTailRefilledBeforeTheCheckIsReported(t *testing.T) {
	t.Parallel()
	b, logs, reader, cl := deliveredThree(t)
	topic := b.kcfg.Topics.Msg

	adm := kadm.NewClient(cl)
	ctx := context.Background()
	details, err := adm.ListTopics(ctx, topic)
	require.NoError(t, err)
	partitions := int32(len(details[topic].Partitions))
	_, err = adm.DeleteTopic(ctx, topic)
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, partitions, 1, nil, topic)
	require.NoError(t, err)

	// The target's next producer (the old one keeps the deleted topic's
	// ID) takes offset 0 again.
	cl = b.producer(t, topic)
	b.addRow(t, TargetMsg, "7001", []byte("v4"), "")
	require.NoError(t, b.drainAll(t, cl, TargetMsg))
	require.Equal(t, int64(1), lostRecords(t, reader, TargetMsg), "the batch that took a lost offset reports the loss")
	require.Contains(t, logs.String(), `"lost_from_offset":0`)
}

// deliveredThree is a bundle whose msg target delivered three versions of
// one key (one partition), with its logs and metrics, and the producer.
func deliveredThree(t *testing.T) (*testBundle, *testutil.LogBuffer, *sdkmetric.ManualReader, *kgo.Client) {
	t.Helper()
	logs := &testutil.LogBuffer{}
	reader := sdkmetric.NewManualReader()
	b := setup(t, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	})
	cl := b.producer(t, b.kcfg.Topics.Msg)
	for _, v := range []string{"v1", "v2", "v3"} {
		b.addRow(t, TargetMsg, "7001", []byte(v), "")
	}
	require.NoError(t, b.drainAll(t, cl, TargetMsg))
	return b, logs, reader, cl
}

// lostRecords reads msgx_dispatcher_broker_lost_records_total of target.
func lostRecords(t *testing.T, reader *sdkmetric.ManualReader, target string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "msgx_dispatcher_broker_lost_records_total" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, _ := dp.Attributes.Value("target"); v.AsString() == target {
					return dp.Value
				}
			}
		}
	}
	t.Fatalf("msgx_dispatcher_broker_lost_records_total{target=%q} is not exported", target)
	return 0
}
