package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
	"msgexchange/services/projector/internal/board"
	"msgexchange/services/projector/internal/consumer"
	"msgexchange/services/projector/internal/freshness"
	"msgexchange/services/projector/internal/httpapi"
	"msgexchange/services/projector/internal/pgsource"
	"msgexchange/services/projector/internal/rebuild"
	"msgexchange/services/projector/internal/recovery"
	"msgexchange/services/projector/internal/sentinel"
	"msgexchange/services/projector/internal/store"
)

// ControlGroupSuffix is appended to projector.group to name the consumer
// group of msgx.projection-control: every projector instance joins it, so
// exactly one of them handles each rebuild manifest.
const ControlGroupSuffix = "-control"

// Timing of the rebuild handler's wait for Redis to hold a manifest's
// versions: how often it checks and how often it logs its progress.
const (
	rebuildPoll          = 250 * time.Millisecond
	rebuildProgressEvery = 10 * time.Second
)

// The projector's own rebuild of a lost projection from PostgreSQL
// (R-H5): flights per page (one PostgreSQL query and one pipelined Redis
// round trip; a few MB at typical document sizes) and the time to live of
// the rebuild lock, renewed every third of it, after which another
// instance takes over from a dead holder.
const (
	recoveryPageSize = 2000
	recoveryLockTTL  = 30 * time.Second
)

// freshnessInterval is the time between two probes of the projection's
// currency (R-N1): about the least age the flight list reports while the
// projector keeps up. Each probe lists the topic's end offsets and the
// group's committed offsets, two small requests.
const freshnessInterval = time.Second

// Deps are the projector's injected dependencies. All are required.
type Deps struct {
	// Logger receives the projector's logs.
	Logger *slog.Logger
	// Clock tells time for outage-duration reporting.
	Clock clock.Clock
	// Meter creates the msgx_projector_* instruments.
	Meter metric.Meter
	// Redis holds the projection; the projector is its only writer.
	Redis *redis.Client
	// Postgres is the system's database, read (never written) to rebuild a
	// projection Redis lost and by the consistency sentinel (R-H5); a
	// read-only role with SELECT on flight is enough.
	Postgres *pgxpool.Pool
	// KeyPrefix starts every Redis key (<prefix>flights,
	// <prefix>flight-versions).
	KeyPrefix string
	// Kafka names the brokers and topics; the projector creates its own
	// client from it.
	Kafka kafka.Config
}

// Service is the projector: a consumer loop that keeps Redis in step with
// msgx.flight-state and acknowledges what it wrote, the HTTP routes that
// read the projection, and the web flight board with its broadcaster loop.
type Service struct {
	store     *store.Store
	recovery  *lifecycle.Service
	sentinel  *lifecycle.Service
	consumer  *consumer.Consumer
	rebuild   *rebuild.Loop
	rebuildLp *lifecycle.Service
	loop      *lifecycle.Service
	http      *httpapi.Handler
	boardLoop *lifecycle.Service
	board     *board.Handler
	freshness *freshness.Tracker
	freshLp   *lifecycle.Service
	// loops are the progress of the Kafka loops (R-L8).
	loops []*progress.Tracker
}

// New validates cfg and deps and builds the projector. Nothing connects
// until the services start.
func New(cfg Config, deps Deps) (*Service, error) {
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, d := range []struct {
		name    string
		missing bool
	}{
		{"Logger", deps.Logger == nil}, {"Clock", deps.Clock == nil}, {"Meter", deps.Meter == nil}, {"Redis", deps.Redis == nil},
		{"Postgres", deps.Postgres == nil},
	} {
		if d.missing {
			errs = append(errs, fmt.Errorf("%w: Deps.%s is nil", ErrMissingDependency, d.name))
		}
	}
	if deps.Kafka.Topics.FlightState == "" || deps.Kafka.Topics.ProjectionAcks == "" || deps.Kafka.Topics.ProjectionControl == "" {
		errs = append(errs, fmt.Errorf("%w: Deps.Kafka has no flight-state, projection-acks or projection-control topic; pass the loaded kafka.Config", ErrMissingDependency))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("creating projector: %w", err)
	}
	// Validate checked the zone.
	zone, err := time.LoadLocation(cfg.Zone)
	if err != nil {
		return nil, fmt.Errorf("creating projector: loading projector.zone: %w", err)
	}
	st := store.New(deps.Redis, deps.KeyPrefix)
	bc := board.NewBroadcaster(st, deps.Logger, deps.Clock, board.BroadcasterOptions{ReadTimeout: cfg.RedisTimeout, Zone: zone})
	c, err := consumer.New(consumer.Config{
		Group:          cfg.Group,
		MaxBatch:       cfg.MaxBatch,
		BackoffMax:     cfg.BackoffMax,
		RedisTimeout:   cfg.RedisTimeout,
		KafkaTimeout:   cfg.KafkaTimeout,
		SessionTimeout: cfg.SessionTimeout,
		InstanceID:     cfg.memberID(),
		OnApplied:      bc.Notify,
		StallLimit:     cfg.StallLimit,
	}, deps.Kafka, st, deps.Logger, deps.Clock, deps.Meter)
	if err != nil {
		return nil, fmt.Errorf("creating projector: %w", err)
	}
	rb, err := rebuild.NewLoop(rebuild.LoopConfig{
		Group:          cfg.Group + ControlGroupSuffix,
		BackoffMax:     cfg.BackoffMax,
		KafkaTimeout:   cfg.KafkaTimeout,
		SessionTimeout: cfg.SessionTimeout,
		InstanceID:     cfg.memberID(),
		StallLimit:     cfg.StallLimit,
	}, deps.Kafka, rebuild.NewHandler(st, deps.Logger.With("component", rebuild.ServiceName), deps.Clock, rebuild.Options{
		Wait:          cfg.RebuildWait,
		Poll:          rebuildPoll,
		MaxAge:        cfg.RebuildMaxAge,
		RedisTimeout:  cfg.RedisTimeout,
		ProgressEvery: rebuildProgressEvery,
		OnChanged:     bc.Notify,
	}), deps.Logger, deps.Meter)
	if err != nil {
		return nil, fmt.Errorf("creating projector: %w", err)
	}
	src := pgsource.New(deps.Postgres, cfg.PostgresTimeout)
	rec, err := recovery.New(st, src, deps.Logger, deps.Clock, deps.Meter, recovery.Options{
		Interval:     cfg.WatchdogInterval,
		PageSize:     recoveryPageSize,
		LockTTL:      recoveryLockTTL,
		RedisTimeout: cfg.RedisTimeout,
		BackoffMax:   cfg.BackoffMax,
		Instance:     cfg.instanceName(),
		OnChanged:    bc.Notify,
	})
	if err != nil {
		return nil, fmt.Errorf("creating projector: %w", err)
	}
	fresh, err := freshness.New(c, st, deps.Clock, deps.Logger, deps.Meter, freshness.Options{
		Interval: freshnessInterval, Timeout: cfg.KafkaTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("creating projector: %w", err)
	}
	if err := progress.RegisterMetrics(deps.Meter, c.Progress(), c.Auth(), rb.Progress()); err != nil {
		return nil, fmt.Errorf("creating projector: %w", err)
	}
	svc := &Service{
		freshness: fresh,
		freshLp:   fresh.Service(),
		loops:     []*progress.Tracker{c.Progress(), c.Auth(), rb.Progress()},
		store:     st,
		recovery:  rec.Service(),
		consumer:  c,
		rebuild:   rb,
		rebuildLp: rb.Service(),
		loop:      c.Service(),
		http:      httpapi.New(st, deps.Logger, httpapi.Options{Timeout: cfg.RedisTimeout, Zone: zone, Age: fresh.Age}),
		boardLoop: bc.Service(),
		board: board.NewHandler(bc, deps.Logger, board.HandlerOptions{
			Complete: st.CheckComplete, CheckTimeout: cfg.RedisTimeout,
			Window:     board.Window{Past: cfg.Board.Past, Ahead: cfg.Board.Ahead},
			MaxStreams: cfg.Board.MaxStreams, MaxStreamsPerClient: cfg.Board.MaxStreamsPerClient,
		}),
	}
	if cfg.Consistency.enabled() {
		sn, err := sentinel.New(st, src, deps.Logger, deps.Meter, sentinel.Options{
			OnStartup:        cfg.Consistency.OnStartup,
			Interval:         cfg.Consistency.Interval,
			DailySampleRatio: cfg.Consistency.DailySampleRatio,
			MinSample:        cfg.Consistency.MinSample,
			Settle:           cfg.Consistency.Settle,
			Poll:             cfg.WatchdogInterval,
			RedisTimeout:     cfg.RedisTimeout,
			BackoffMax:       cfg.BackoffMax,
			OnChanged:        bc.Notify,
		})
		if err != nil {
			return nil, fmt.Errorf("creating projector: %w", err)
		}
		svc.sentinel = sn.Service()
	}
	return svc, nil
}

// Services returns the projector's long-running loops: the consumer
// (lifecycle name "projector-consumer"), the probe of the projection's
// age ("projector-freshness", R-N1), the projection rebuild loop
// ("projector-rebuild", R-E4), which completes the control plane's
// rebuilds in Redis, the watchdog ("projector-recovery", R-H5), which
// rebuilds a projection Redis lost from PostgreSQL, the consistency
// sentinel ("projector-sentinel", R-H5; absent when its checks are off),
// and the flight board's broadcaster ("projector-board"), which reads
// Redis only while a board is open. The HTTP routes are served by the
// process's HTTP server through RegisterRoutes.
func (s *Service) Services() []*lifecycle.Service {
	out := []*lifecycle.Service{s.loop, s.freshLp, s.rebuildLp, s.recovery}
	if s.sentinel != nil {
		out = append(out, s.sentinel)
	}
	return append(out, s.boardLoop)
}

// RegisterRoutes adds GET /all/flights (every current flight, sorted by
// FLID; 503 JSON when Redis cannot be read or lost the projection, never
// an empty or partial list),
// GET /flights/{flid} (one flight; 404 when absent) and the web flight
// board (GET / and GET /board, its assets under /board/assets/, and its
// Server-Sent Events stream GET /board/events, R-E3) to mux.
func (s *Service) RegisterRoutes(mux *http.ServeMux) {
	s.http.Register(mux)
	s.board.Register(mux)
}

// Ready reports nil when this projector can serve what its Service sends
// it — Redis answers and holds the whole projection (not while a lost one is
// being rebuilt from PostgreSQL, R-H5) — and its Kafka loops are not
// stalled (fenced, refused by the brokers, R-L8). An unreachable broker
// does not make it unready: the flight list, the board and the flight
// lookups read Redis only, and say how old the projection is (R-N1).
func (s *Service) Ready(ctx context.Context) error {
	return errors.Join(s.store.CheckComplete(ctx), progress.Check(s.loops...))
}

// ProjectionAge returns how old the projection is (R-N1); ok is false
// until an instance recorded when it was last current.
func (s *Service) ProjectionAge() (time.Duration, bool) { return s.freshness.Age() }
