package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/goleak"

	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
	"msgexchange/libs/testutil/kafkatest"
)

// The consumer loop is exercised end to end, against Redis and the Kafka
// broker, by the projector package's tests; this package tests its parts.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConsumer_PingNeedsARunningClient(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Group: "g", MaxBatch: 10, BackoffMax: time.Second, RedisTimeout: time.Second, KafkaTimeout: time.Second},
		kafkatest.DefaultConfig(), nil, logging.Discard(), clock.Real{}, noop.NewMeterProvider().Meter("t"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.ErrorContains(t, c.Ping(ctx), "not running")
}
