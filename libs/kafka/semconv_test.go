package kafka_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil/kafkatest"
)

// spanAttrs returns the attributes of the ended span called name.
func spanAttrs(t *testing.T, rec *tracetest.SpanRecorder, name string) map[attribute.Key]attribute.Value {
	t.Helper()
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes() {
				out[kv.Key] = kv.Value
			}
			return out
		}
	}
	t.Fatalf("no span %q among %d", name, len(rec.Ended()))
	return nil
}

// TestTracing_R_N2_MessagingAttributesOnKafkaSpans: franz-go's publish and
// receive spans carry the current messaging semantic conventions —
// messaging.system=kafka, the operation type and name, the topic, the
// key, the partition and offset the broker gave the record, and on the
// receiving side the consumer group — recorded with an in-memory
// exporter.
func TestTracing_R_N2_MessagingAttributesOnKafkaSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &cfg)
	cfg.Tracing = tp
	log := slog.New(slog.DiscardHandler)
	topic := cfg.Topics.Inbox

	prod, err := kgo.NewClient(append(cfg.ClientOpts(log, "test-producer"), kgo.DefaultProduceTopic(topic))...)
	require.NoError(t, err)
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		sctx, span := cfg.Tracer("test").Start(ctx, "message")
		r := &kgo.Record{Key: []byte("1042"), Value: []byte("v"), Context: sctx}
		require.NoError(t, prod.ProduceSync(ctx, r).FirstErr(), "record %d", i)
		span.End()
	}

	cons, err := kgo.NewClient(append(cfg.ClientOpts(log, "test-consumer"),
		kgo.ConsumerGroup("msgx-test-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cons.Close()
	var got []*kgo.Record
	for len(got) < 3 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		got = append(got, fs.Records()...)
	}
	last := got[2]

	publish := spanAttrs(t, rec, topic+" publish")
	require.Equal(t, "kafka", publish[semconv.MessagingSystemKey].AsString())
	require.Equal(t, "send", publish[semconv.MessagingOperationTypeKey].AsString())
	require.Equal(t, "send", publish[semconv.MessagingOperationNameKey].AsString())
	require.Equal(t, topic, publish[semconv.MessagingDestinationNameKey].AsString())
	require.Equal(t, "1042", publish[semconv.MessagingKafkaMessageKeyKey].AsString())
	require.Contains(t, publish, semconv.MessagingDestinationPartitionIDKey, "known once the broker acknowledged")
	require.Contains(t, publish, semconv.MessagingKafkaOffsetKey)

	receive := spanAttrs(t, rec, topic+" receive")
	require.Equal(t, "kafka", receive[semconv.MessagingSystemKey].AsString())
	require.Equal(t, "receive", receive[semconv.MessagingOperationTypeKey].AsString())
	require.Equal(t, "poll", receive[semconv.MessagingOperationNameKey].AsString())
	require.Equal(t, topic, receive[semconv.MessagingDestinationNameKey].AsString())
	require.Equal(t, "1042", receive[semconv.MessagingKafkaMessageKeyKey].AsString())
	require.Equal(t, "msgx-test-group", receive[semconv.MessagingConsumerGroupNameKey].AsString())

	// The helper the services' own spans use names a fetched record's
	// placement.
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range kafka.MessagingAttributes(kafka.OpProcess, last, "g") {
		attrs[kv.Key] = kv.Value
	}
	require.Equal(t, "process", attrs[semconv.MessagingOperationTypeKey].AsString())
	require.Equal(t, strconv.Itoa(int(last.Partition)), attrs[semconv.MessagingDestinationPartitionIDKey].AsString())
	require.Equal(t, last.Offset, attrs[semconv.MessagingKafkaOffsetKey].AsInt64())
	require.Equal(t, "g", attrs[semconv.MessagingConsumerGroupNameKey].AsString())
}
