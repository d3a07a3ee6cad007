package consumer

import (
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

func TestConsumer_R_L8_StartsProgressingWithItsInstanceID(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Group: "g", MaxBatch: 10, BackoffMax: time.Second, RedisTimeout: time.Second, KafkaTimeout: time.Second, InstanceID: "p1"},
		kafkatest.DefaultConfig(), nil, logging.Discard(), clock.Real{}, noop.NewMeterProvider().Meter("t"))
	require.NoError(t, err)
	require.NoError(t, c.Progress().Err())
	require.Equal(t, "p1", c.InstanceID())
	require.Equal(t, defaultStallLimit, c.cfg.StallLimit)
}
