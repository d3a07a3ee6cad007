package kafka_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
)

// TestClientOpts_R_M3_RetriesAtMostASecondApart: a client built from
// ClientOpts waits at most kafka.Retry.Max between retries however many
// have failed, and asks for metadata at most MetadataMinAge apart — not
// franz-go's 5 s and 5 s, which leave a client failing for seconds after
// its broker came back.
func TestClientOpts_R_M3_RetriesAtMostASecondApart(t *testing.T) {
	t.Parallel()
	cfg := kafkatest.DefaultConfig()
	cfg.Brokers = "127.0.0.1:1"
	cl, err := kgo.NewClient(cfg.ClientOpts(slog.New(slog.DiscardHandler), "retry")...)
	require.NoError(t, err)
	defer cl.Close()
	require.Equal(t, kafka.MetadataMinAge, cl.OptValue(kgo.MetadataMinAge))
	backoff, ok := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration)
	require.True(t, ok, "the client's retry backoff")
	for fails := 1; fails <= 30; fails++ {
		require.LessOrEqual(t, backoff(fails), time.Second, "the wait after %d failures", fails)
	}
}

// TestClient_R_M3_ProducesWithinASecondOfTheBrokersReturn: a producer
// built from ClientOpts sends a record while its broker is unreachable for
// longer than every retry step (8 s, through a fault proxy the broker
// advertises); once the broker is reachable again the record is written
// within 1.5 s. With franz-go's own schedule the producer was still
// backing off for seconds (up to 5 s between attempts, metadata at most
// every 5 s): after a broker outage the whole pipeline stood still that
// long (R-M3's drain).
func TestClient_R_M3_ProducesWithinASecondOfTheBrokersReturn(t *testing.T) {
	testutil.Integration(t)
	t.Parallel()
	cfg := kafkatest.DefaultConfig()
	cfg.DialTimeout = 500 * time.Millisecond
	_, proxy := kafkatest.NewClusterBehind(t, &cfg)
	cl, err := kgo.NewClient(cfg.ClientOpts(slog.New(slog.DiscardHandler), "retry")...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := func(v string) *kgo.Record { return &kgo.Record{Topic: cfg.Topics.Inbox, Value: []byte(v)} }
	require.NoError(t, cl.ProduceSync(ctx, rec("before")).FirstErr())

	proxy.Down()
	done := make(chan error, 1)
	cl.Produce(ctx, rec("during"), func(_ *kgo.Record, err error) { done <- err })
	// The outage outlasts every step of franz-go's own schedule (250 ms
	// doubling to 5 s: 7.75 s in all) and its metadata floor.
	select {
	case err := <-done:
		t.Fatalf("the record was acknowledged while the broker was unreachable: %v", err)
	case <-time.After(8 * time.Second):
	}
	require.NoError(t, proxy.Up())
	back := time.Now()
	select {
	case err := <-done:
		require.NoError(t, err)
		took := time.Since(back)
		t.Logf("written %s after the broker's return", took.Round(time.Millisecond))
		require.Less(t, took, 1500*time.Millisecond, "the record's write after the broker's return")
	case <-ctx.Done():
		t.Fatal("the record was never written after the broker's return")
	}
}
