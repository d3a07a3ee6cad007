package kafka_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil/kafkatest"
)

func headerOf(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestTracing_R_I4_TraceContextRidesRecordHeaders: with Config.Tracing
// set, a record produced inside a span carries its W3C trace context in
// the traceparent header and the consumer continues the same trace
// (publish and receive spans, RecordContext); a record produced with no
// span gets no header and starts no trace.
func TestTracing_R_I4_TraceContextRidesRecordHeaders(t *testing.T) {
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
	sctx, span := cfg.Tracer("test").Start(ctx, "message")
	traced := &kgo.Record{Key: []byte("1"), Value: []byte("traced"), Context: sctx}
	plain := &kgo.Record{Key: []byte("2"), Value: []byte("plain")}
	require.NoError(t, prod.ProduceSync(ctx, traced, plain).FirstErr())
	span.End()

	cons, err := kgo.NewClient(append(cfg.ClientOpts(log, "test-consumer"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	require.NoError(t, err)
	defer cons.Close()
	var got []*kgo.Record
	for len(got) < 2 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		got = append(got, fs.Records()...)
	}
	byKey := map[string]*kgo.Record{}
	for _, r := range got {
		byKey[string(r.Key)] = r
	}

	tp1, ok := headerOf(byKey["1"], "traceparent")
	require.True(t, ok, "a record produced inside a span carries traceparent")
	require.Contains(t, tp1, span.SpanContext().TraceID().String())
	rc := trace.SpanContextFromContext(kafka.RecordContext(context.Background(), byKey["1"]))
	require.Equal(t, span.SpanContext().TraceID(), rc.TraceID(), "the consumer continues the producer's trace")

	_, ok = headerOf(byKey["2"], "traceparent")
	require.False(t, ok, "a record produced without a span carries no traceparent")
	require.False(t, trace.SpanContextFromContext(kafka.RecordContext(context.Background(), byKey["2"])).IsValid())

	names := map[string]trace.TraceID{}
	for _, s := range rec.Ended() {
		names[s.Name()] = s.SpanContext().TraceID()
	}
	require.Equal(t, span.SpanContext().TraceID(), names[topic+" publish"])
	require.Equal(t, span.SpanContext().TraceID(), names[topic+" receive"])
	require.Len(t, rec.Ended(), 3, "message, publish and receive of the traced record; nothing for the plain one")
}

// Without Config.Tracing no header is written and Tracer is a no-op.
func TestTracing_R_I4_OffWritesNoHeaders(t *testing.T) {
	t.Parallel()
	cfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &cfg)
	log := slog.New(slog.DiscardHandler)
	prod, err := kgo.NewClient(append(cfg.ClientOpts(log, "test-producer"), kgo.DefaultProduceTopic(cfg.Topics.Inbox))...)
	require.NoError(t, err)
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sctx, span := cfg.Tracer("test").Start(ctx, "message")
	require.False(t, span.SpanContext().IsValid())
	r := &kgo.Record{Key: []byte("1"), Value: []byte("v"), Context: sctx}
	require.NoError(t, prod.ProduceSync(ctx, r).FirstErr())
	span.End()
	_, ok := headerOf(r, "traceparent")
	require.False(t, ok)
}
