package rebuild

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
	"msgexchange/services/internal/flightstate"
)

// ServiceName is the lifecycle name of the manifest loop.
const ServiceName = "projector-rebuild"

// LoopConfig tunes the manifest loop.
type LoopConfig struct {
	// Group is the consumer group of msgx.projection-control, shared by
	// every projector instance so that one of them handles each manifest.
	Group string
	// BackoffMax caps the wait (100ms doubling) before a manifest whose
	// handling failed is handled again.
	BackoffMax time.Duration
	// KafkaTimeout bounds one offset commit.
	KafkaTimeout time.Duration
	// SessionTimeout is the consumer-group session timeout; zero keeps the
	// client default.
	SessionTimeout time.Duration
	// InstanceID, when set, makes this member a static group member, as
	// the flight-state consumer is (the groups differ, so the same ID
	// serves both).
	InstanceID string
	// StallLimit is how long the loop may stay stalled (R-L8) before it
	// ends its service and so the process; zero means 1 minute.
	StallLimit time.Duration
}

// Loop consumes rebuild manifests and hands each to the Handler, one at a
// time, committing its offset once handled.
type Loop struct {
	cfg     LoopConfig
	kafka   kafka.Config
	handler *Handler
	logger  *slog.Logger
	base    *slog.Logger
	rebuilt metric.Int64Counter
	removed metric.Int64Counter

	progress *progress.Tracker

	mu         sync.Mutex
	client     *kgo.Client
	instanceID string
}

// NewLoop builds the loop; the Kafka client is created when it starts.
func NewLoop(cfg LoopConfig, kcfg kafka.Config, h *Handler, logger *slog.Logger, meter metric.Meter) (*Loop, error) {
	rebuilt, err := meter.Int64Counter("msgx_projector_rebuilds_total",
		metric.WithDescription("projection rebuild manifests handled, by outcome (complete, incomplete, expired, invalid)"))
	if err != nil {
		return nil, fmt.Errorf("creating rebuild metrics: %w", err)
	}
	removed, err := meter.Int64Counter("msgx_projector_rebuild_stale_removed_total",
		metric.WithDescription("stale flights removed from Redis by projection rebuilds"))
	if err != nil {
		return nil, fmt.Errorf("creating rebuild metrics: %w", err)
	}
	// Exported at zero from the start, so alerts on outcome!="complete"
	// work from the first scrape (R-I4).
	for _, o := range []Outcome{Complete, Incomplete, Expired, Invalid} {
		rebuilt.Add(context.Background(), 0, metric.WithAttributes(attribute.String("outcome", string(o))))
	}
	removed.Add(context.Background(), 0)
	if cfg.StallLimit <= 0 {
		cfg.StallLimit = time.Minute
	}
	return &Loop{cfg: cfg, kafka: kcfg, handler: h, logger: logger.With("component", ServiceName), base: logger,
		rebuilt: rebuilt, removed: removed, progress: progress.New(ServiceName, clock.Real{}), instanceID: cfg.InstanceID}, nil
}

// Service returns the loop's lifecycle service.
func (l *Loop) Service() *lifecycle.Service {
	return lifecycle.NewService(ServiceName, l.starting, l.running, l.stopping)
}

// Progress is the loop's progress (R-L8): stalled while the broker refuses
// its group membership for a reason waiting does not cure.
func (l *Loop) Progress() *progress.Tracker { return l.progress }

func (l *Loop) starting(context.Context) error {
	l.mu.Lock()
	id := l.instanceID
	l.mu.Unlock()
	cl, err := l.newClient(id)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.client = cl
	l.mu.Unlock()
	return nil
}

// newClient creates the manifest client, a static group member under
// instanceID when it is set. Creating it needs no broker.
func (l *Loop) newClient(instanceID string) (*kgo.Client, error) {
	opts := append(l.kafka.ClientOpts(l.base, "projector-rebuild"),
		kgo.ConsumerGroup(l.cfg.Group),
		kgo.ConsumeTopics(l.kafka.Topics.ProjectionControl),
		// A new group reads the manifests still retained; the handler
		// skips those older than the maximum age.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// The offset is committed only after the manifest was handled.
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { l.progress.Progressed() }),
	)
	if l.cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(l.cfg.SessionTimeout), kgo.HeartbeatInterval(l.cfg.SessionTimeout/10),
			kgo.RebalanceTimeout(l.cfg.SessionTimeout+5*time.Second))
	}
	if instanceID != "" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	return cl, nil
}

// rejoin replaces a fenced client by one under a new static member ID
// derived from the configured one, as the flight-state consumer does.
func (l *Loop) rejoin(old *kgo.Client, cause error) (*kgo.Client, error) {
	l.mu.Lock()
	from := l.instanceID
	l.instanceID = kafka.RejoinInstanceID(l.cfg.InstanceID)
	to := l.instanceID
	l.mu.Unlock()
	l.logger.Error("fenced: another projector joined the group with this static member ID; rejoining under a new one",
		"group", l.cfg.Group, "instance_id", from, "new_instance_id", to, "err", cause)
	old.Close()
	cl, err := l.newClient(to)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.client = cl
	l.mu.Unlock()
	return cl, nil
}

func (l *Loop) stopping(error) error {
	l.mu.Lock()
	cl := l.client
	l.client = nil
	l.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
	return nil
}

func (l *Loop) running(ctx context.Context) error {
	l.mu.Lock()
	cl := l.client
	l.mu.Unlock()
	wait := kafka.NewPollWait()
	for {
		fetches := cl.PollRecords(ctx, 1)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		failed, permanent := kafka.FetchErrors(fetches, func(topic string, partition int32, err error) {
			l.logger.Warn("fetching projection rebuild manifests", "topic", topic, "partition", partition, "err", err)
		})
		if permanent != nil {
			l.progress.Stalled(permanent)
			if err := l.progress.Exceeded(l.cfg.StallLimit); err != nil {
				return err
			}
			if kafka.Fenced(permanent) && l.cfg.InstanceID != "" {
				var err error
				if cl, err = l.rejoin(cl, permanent); err != nil {
					return err
				}
				continue
			}
		}
		recs := fetches.Records()
		for _, r := range recs {
			if err := l.handle(ctx, r); err != nil {
				return nil // only the end of ctx stops a manifest; it stays uncommitted
			}
		}
		if err := wait.After(ctx, failed, len(recs)); err != nil {
			return nil
		}
	}
}

// handle handles one manifest record until it is done, retrying failures
// with backoff, then commits it. It returns an error only when ctx ended.
func (l *Loop) handle(ctx context.Context, r *kgo.Record) error {
	m, err := flightstate.DecodeManifest(r.Value)
	if err != nil {
		l.logger.Error("skipping a projection-control record that is not a rebuild manifest",
			"partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "err", err)
		l.rebuilt.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(Invalid))))
		l.commit(ctx, r)
		return nil
	}
	retry := backoff.New(100*time.Millisecond, l.cfg.BackoffMax)
	for attempt := 1; ; attempt++ {
		res, err := l.handler.Handle(ctx, m)
		if err == nil {
			l.rebuilt.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(res.Outcome))))
			l.removed.Add(ctx, int64(res.Removed))
			level := slog.LevelInfo
			if res.Outcome != Complete {
				level = slog.LevelWarn
			}
			l.logger.Log(ctx, level, "projection rebuild handled", "generation", res.Generation, "outcome", string(res.Outcome),
				"operator", m.Operator, "stale_removed", res.Removed, "kept", res.Kept, "missing", res.Missing, "waited", res.Waited.String())
			l.commit(ctx, r)
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		d := retry.Next()
		l.logger.Warn("handling projection rebuild failed; retrying", "generation", m.Generation, "attempt", attempt,
			"retry_in", d.String(), "err", err)
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// commit commits a handled manifest, even when shutdown has begun. A
// failed commit is logged: the manifest is handled again later, harmlessly.
func (l *Loop) commit(ctx context.Context, r *kgo.Record) {
	l.mu.Lock()
	cl := l.client
	l.mu.Unlock()
	if cl == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.KafkaTimeout)
	defer cancel()
	if err := cl.CommitRecords(cctx, r); err != nil {
		l.logger.Warn("committing projection rebuild offset failed; the manifest will be handled again, harmlessly",
			"offset", r.Offset, "err", err)
	}
}
