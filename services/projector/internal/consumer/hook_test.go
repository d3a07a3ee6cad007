package consumer

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric/noop"

	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/services/projector/internal/store"
)

// scriptedStore answers Apply with the outcome the test chose per FLID
// (Applied unless listed as stale).
type scriptedStore struct {
	mu    sync.Mutex
	stale map[int64]bool
}

func (s *scriptedStore) Apply(_ context.Context, updates []store.Update) ([]store.Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Outcome, len(updates))
	for i, u := range updates {
		if !s.stale[u.FLID] {
			out[i] = store.Applied
		}
	}
	return out, nil
}

// R-E3: the consumer calls OnApplied after a batch that changed Redis (the
// flight board's trigger), and not after a batch of stale records only.
// The acks of a batch are produced after the hook, so an ack seen means the
// hook had its chance to run.
func TestConsumer_R_E3_OnAppliedAfterBatchThatChangedRedis(t *testing.T) {
	t.Parallel()
	kcfg := kafkatest.DefaultConfig()
	kafkatest.NewCluster(t, &kcfg)
	calls := make(chan struct{}, 100)
	st := &scriptedStore{stale: map[int64]bool{99: true}}
	c, err := New(Config{
		Group: "g", MaxBatch: 10, BackoffMax: 100 * time.Millisecond, RedisTimeout: time.Second, KafkaTimeout: 10 * time.Second,
		OnApplied: func() { calls <- struct{}{} },
	}, kcfg, st, logging.Discard(), clock.Real{}, noop.NewMeterProvider().Meter("t"))
	require.NoError(t, err)
	svc := c.Service()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() {
		svc.StopAsync()
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		require.NoError(t, svc.AwaitTerminated(sctx))
	})
	require.NoError(t, svc.AwaitRunning(ctx))

	cl, err := kgo.NewClient(append(kcfg.ClientOpts(slog.New(slog.DiscardHandler), "test"),
		kgo.ConsumeTopics(kcfg.Topics.ProjectionAcks), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cl.Close()
	produce := func(flid int64) {
		v := []byte(`{"schema":1,"flid":` + strconv.FormatInt(flid, 10) + `,"version":1,"doc":{}}`)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: kcfg.Topics.FlightState, Key: strconv.AppendInt(nil, flid, 10), Value: v}).FirstErr())
	}
	awaitAck := func(flid int64) {
		for {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "no ack for flight %d", flid)
			found := false
			fs.EachRecord(func(r *kgo.Record) {
				var a ack
				require.NoError(t, json.Unmarshal(r.Value, &a))
				found = found || a.FLID == flid
			})
			if found {
				return
			}
		}
	}

	produce(99) // stale only: Redis unchanged
	awaitAck(99)
	require.Empty(t, calls, "no notification for a batch that changed nothing")

	produce(15)
	awaitAck(15)
	require.Len(t, calls, 1)
}
