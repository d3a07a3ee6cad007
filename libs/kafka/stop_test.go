package kafka_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
)

// TestCloseOnStop_EndsAProduceTheBrokerNeverAnswers: an idempotent
// producer's ProduceSync to a broker that is down ignores its context;
// CloseOnStop ends it when the service's context ends.
func TestCloseOnStop_EndsAProduceTheBrokerNeverAnswers(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.DialTimeout(100*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	closeNow := kafka.CloseOnStop(ctx, cl)
	defer closeNow()
	done := make(chan error, 1)
	go func() { done <- cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("x")}).FirstErr() }()
	cancel()
	select {
	case err := <-done:
		require.True(t, errors.Is(err, kgo.ErrClientClosed), "%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the produce did not end when the context ended")
	}
}
