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
	"msgexchange/libs/kafka"
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
	k := runConsumer(t, kcfg, st, Config{BackoffMax: 100 * time.Millisecond, OnApplied: func() { calls <- struct{}{} }})

	k.produce(99) // stale only: Redis unchanged
	k.awaitAck(99)
	require.Empty(t, calls, "no notification for a batch that changed nothing")

	k.produce(15)
	k.awaitAck(15)
	require.Len(t, calls, 1)
}

// consumerRun is a Consumer running against a test broker, with a client
// of the test's own that writes flight-state records and reads the acks.
type consumerRun struct {
	t    *testing.T
	ctx  context.Context
	cl   *kgo.Client
	kcfg kafka.Config
}

// runConsumer starts a Consumer of cfg (its group, batch and timeouts set
// here) on kcfg's broker over st and stops it when the test ends.
func runConsumer(t *testing.T, kcfg kafka.Config, st Store, cfg Config) *consumerRun {
	t.Helper()
	cfg.Group, cfg.MaxBatch, cfg.RedisTimeout, cfg.KafkaTimeout = "g", 10, time.Second, 10*time.Second
	c, err := New(cfg, kcfg, st, logging.Discard(), clock.Real{}, noop.NewMeterProvider().Meter("t"))
	require.NoError(t, err)
	svc := c.Service()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
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
	t.Cleanup(cl.Close)
	return &consumerRun{t: t, ctx: ctx, cl: cl, kcfg: kcfg}
}

// produce writes a flight-state record of flid.
func (k *consumerRun) produce(flid int64) {
	k.t.Helper()
	v := []byte(`{"schema":1,"flid":` + strconv.FormatInt(flid, 10) + `,"version":1,"doc":{}}`)
	require.NoError(k.t, k.cl.ProduceSync(k.ctx, &kgo.Record{Topic: k.kcfg.Topics.FlightState, Key: strconv.AppendInt(nil, flid, 10), Value: v}).FirstErr())
}

// awaitAck reads acks until one of flid's.
func (k *consumerRun) awaitAck(flid int64) {
	k.t.Helper()
	for {
		fs := k.cl.PollFetches(k.ctx)
		require.NoError(k.t, k.ctx.Err(), "no ack for flight %d", flid)
		found := false
		fs.EachRecord(func(r *kgo.Record) {
			var a ack
			require.NoError(k.t, json.Unmarshal(r.Value, &a))
			found = found || a.FLID == flid
		})
		if found {
			return
		}
	}
}
