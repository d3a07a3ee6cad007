package kafka_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
	"msgexchange/libs/telemetry"
	"msgexchange/libs/testutil/kafkatest"
)

// series reads every counter and gauge of tel as name{label=value,…} →
// value, labels in the exporter's (sorted) order.
func series(t *testing.T, tel *telemetry.Telemetry) map[string]float64 {
	t.Helper()
	fams, err := tel.Gatherer().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			key += "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestMetrics_R_I4_ClientsMeasuredFromTheirOptions: a client built from
// ClientOpts with Config.Metrics set is measured under its component name —
// its error counters at zero from its creation, its produced and fetched
// records per topic, its request durations — and a broker that refuses the
// connection counts as a connect error.
func TestMetrics_R_I4_ClientsMeasuredFromTheirOptions(t *testing.T) {
	t.Parallel()
	tel, err := telemetry.New(telemetry.Build{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tel.Provider.Shutdown(context.Background()) })
	cfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &cfg)
	cfg.Metrics, err = kafka.NewMetrics(tel.Meter("kafka"))
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)

	producer, err := kgo.NewClient(cfg.ClientOpts(log, "test-producer")...)
	require.NoError(t, err)
	defer producer.Close()
	s := series(t, tel)
	for _, name := range []string{"msgx_kafka_connect_errors_total", "msgx_kafka_write_errors_total", "msgx_kafka_read_errors_total"} {
		v, ok := s[name+"{client=test-producer}"]
		require.True(t, ok, "%s not exported at creation", name)
		require.Zero(t, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 5
	for i := range n {
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: cfg.Topics.Inbox, Key: []byte{byte('0' + i)}, Value: []byte("x")}).FirstErr())
	}
	consumer, err := kgo.NewClient(append(cfg.ClientOpts(log, "test-consumer"), kgo.ConsumeTopics(cfg.Topics.Inbox),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer consumer.Close()
	got := 0
	for got < n {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		got += fs.NumRecords()
	}

	// franz-go calls the batch-written hook around the records' promises,
	// not necessarily before ProduceSync returns: wait for the count.
	require.Eventually(t, func() bool {
		s = series(t, tel)
		return s["msgx_kafka_produced_records_total{client=test-producer,topic=msgx.inbox}"] == float64(n)
	}, 10*time.Second, 10*time.Millisecond, "every produced record counted")
	require.Positive(t, s["msgx_kafka_produced_bytes_total{client=test-producer,topic=msgx.inbox}"])
	require.GreaterOrEqual(t, s["msgx_kafka_fetched_records_total{client=test-consumer,topic=msgx.inbox}"], float64(n))
	require.GreaterOrEqual(t, s["msgx_kafka_connects_total{client=test-producer}"], 1.0)
	require.GreaterOrEqual(t, s["msgx_kafka_request_duration_seconds{client=test-producer,request=Produce}"], float64(n))
	require.Contains(t, s, "msgx_kafka_buffered_produce_records{client=test-producer}")
	require.Contains(t, s, "msgx_kafka_buffered_fetch_records{client=test-consumer}")

	// A broker that refuses connections: a port that was just free.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	bad := cfg
	bad.Brokers = dead
	refused, err := kgo.NewClient(bad.ClientOpts(log, "test-refused")...)
	require.NoError(t, err)
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	require.Error(t, refused.Ping(pctx))
	pcancel()
	refused.Close()
	s = series(t, tel)
	require.GreaterOrEqual(t, s["msgx_kafka_connect_errors_total{client=test-refused}"], 1.0)
	// A closed client no longer reports buffers.
	require.NotContains(t, s, "msgx_kafka_buffered_produce_records{client=test-refused}")
}
