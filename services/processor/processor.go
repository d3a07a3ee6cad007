package processor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/processor/internal/pipeline"
)

// Deps are the processor's collaborators.
type Deps struct {
	Logger   *slog.Logger
	Clock    clock.Clock
	Meter    metric.Meter
	Postgres *pgxpool.Pool
	Kafka    kafka.Config
	// Elector makes the processor single-active under the "processor"
	// lease and fences its transactions (R-B8). The binary always sets it
	// (R-F6); only tests of the processor alone leave it nil.
	Elector pipeline.Elector
}

// Service is a running processor.
type Service struct {
	engine *pipeline.Engine
	pool   *pgxpool.Pool
	lease  readier             // nil without an elector that tells
	kafka  *kafka.Reachability // nil when not wired (tests)
}

// New builds the processor.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	retry, deprecation, _ := cfg.Pipeline.RetrySchedule()
	if deprecation != "" {
		deps.Logger.Warn(deprecation, "flag", "processor.pipeline.backoff")
	}
	eng, err := pipeline.NewEngine(engineOptions(cfg, deps, retry))
	if err != nil {
		return nil, err
	}
	svc := &Service{engine: eng, pool: deps.Postgres, kafka: deps.Kafka.Reach}
	svc.lease, _ = deps.Elector.(readier)
	return svc, nil
}

// Services returns the inbox registrar, the executor and the ack consumer.
func (s *Service) Services() []*lifecycle.Service { return s.engine.Services() }

// engineOptions is the pipeline's configuration from the processor's
// (validated) flags and its dependencies, with retry the schedule that
// cfg's retry flags give. Every option a flag sets is wired here
// (TestEngineOptions_R_L8_R_H4_EveryFlagReachesTheEngine).
func engineOptions(cfg Config, deps Deps, retry backoff.Schedule) pipeline.Options {
	zone, _ := time.LoadLocation(cfg.OpDay.Zone)
	ignore := map[string]bool{}
	for _, t := range cfg.Pipeline.IgnoredTypes() {
		ignore[t] = true
	}
	runAt, _ := parseRunAt(cfg.History.RunAt)
	return pipeline.Options{
		Elector:              deps.Elector,
		Logger:               deps.Logger.With("component", "processor"),
		Clock:                deps.Clock,
		Meter:                deps.Meter,
		Pool:                 deps.Postgres,
		Kafka:                deps.Kafka,
		MaxAttempts:          cfg.Pipeline.MaxAttempts,
		Retry:                retry,
		HeadDeadline:         cfg.Pipeline.HeadDeadline,
		StallLimit:           cfg.Pipeline.StallLimit,
		SnapshotBatch:        cfg.Pipeline.SnapshotBatch,
		MaxRecords:           cfg.Pipeline.MaxRecords,
		Batch:                cfg.Pipeline.Batch,
		IgnoreTypes:          ignore,
		IncludeDayBoundary:   cfg.Identity.IncludeDayBoundary,
		Zone:                 zone,
		CutoffHour:           cfg.OpDay.CutoffHour,
		ConsumerName:         cfg.Offsets.ConsumerName,
		RQFDTimeout:          cfg.Request.RQFDTimeout,
		RQRDTimeout:          cfg.Request.RQRDTimeout,
		RequestRetention:     cfg.Request.Retention,
		RequestSweepInterval: cfg.Request.SweepInterval,
		RecordRetention:      cfg.Pipeline.RecordRetention,
		SelfCheckInterval:    cfg.Pipeline.SelfCheckInterval,
		SelfCheckGrace:       cfg.Pipeline.SelfCheckGrace,
		HistoryRetention:     cfg.History.Retention,
		HistoryRunAt:         runAt,
		HistoryKeep:          cfg.History.Keep,
		JobShare:             cfg.History.JobShare,
	}
}

// readier is an Elector that tells whether the control plane answers its
// lease calls (lease.Elector.Ready).
type readier interface{ Ready() error }

// Ready reports whether PostgreSQL answers, the brokers answer the
// processor's Kafka clients (kafka.Reachability: the inbox and the
// acknowledgements come through them), no Kafka loop is stalled by a
// broker's refusal (R-L8), and the control plane answers the
// lease calls: without them the processor lost its term or cannot take
// one, or takes in nothing, and does no work (R-M2).
func (s *Service) Ready(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pinging postgres: %w", err)
	}
	if s.kafka != nil {
		if err := s.kafka.Ready(); err != nil {
			return err
		}
	}
	if err := s.engine.Progress(); err != nil {
		return err // a loop the broker refuses (R-L8)
	}
	if s.lease != nil {
		return s.lease.Ready()
	}
	return nil
}
