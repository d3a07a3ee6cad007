package pipeline

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/flight"
)

// Options configure an Engine.
type Options struct {
	Logger             *slog.Logger
	Clock              clock.Clock
	Meter              metric.Meter
	Pool               *pgxpool.Pool
	Kafka              kafka.Config
	MaxAttempts        int
	Backoff            []time.Duration
	BackoffCap         time.Duration
	HeadDeadline       time.Duration
	IgnoreTypes        map[string]bool
	IncludeDayBoundary bool
	Zone               *time.Location
	CutoffHour         int
	ConsumerName       string
	// RQFDTimeout and RQRDTimeout are how long a sent request waits for its
	// answer (R-D5); zero means DefaultRQFDTimeout / DefaultRQRDTimeout.
	RQFDTimeout time.Duration
	RQRDTimeout time.Duration
	// RequestRetention is how long closed requests are kept; zero means
	// DefaultRequestRetention.
	RequestRetention time.Duration
	// RequestSweepInterval is how often the request timers run; zero means
	// DefaultRequestSweepInterval.
	RequestSweepInterval time.Duration
	// RecordRetention is how long terminal, backfilled records are kept
	// after they finished (R-B10); 0 means DefaultRecordRetention.
	RecordRetention time.Duration
	// HistoryRetention is how many whole days after its operation day a
	// flight stays live (R-C11); 0 means DefaultHistoryRetention.
	HistoryRetention time.Duration
	// HistoryRunAt is the time of day, in Zone, of the daily maintenance
	// (record cleanup and history sweep), as an offset from midnight.
	HistoryRunAt time.Duration
	// CleanupBatch is how many records one cleanup statement deletes at
	// most; 0 means 1000.
	CleanupBatch int
	// MaintenancePoll is how often the maintenance loop reads the clock;
	// 0 means one minute.
	MaintenancePoll time.Duration
	// Elector, when set, makes the processor single-active under the
	// processor lease and fences every transaction (R-B8); nil only in tests
	// of the engine alone.
	Elector Elector
	// Holder names this instance in the lease; empty means lease.Holder().
	Holder string
	// SnapshotBatch is how many records one transaction of a daily
	// snapshot writes (R-C6); 0 means DefaultSnapshotBatch (200).
	SnapshotBatch int
}

// Engine owns the processor's loops.
type Engine struct {
	opt     Options
	log     *slog.Logger
	pool    *pgxpool.Pool
	clock   clock.Clock
	opday   flight.OpDay
	wake    chan struct{}
	metrics *metrics
	fencing fencing
}

// NewEngine builds an engine.
func NewEngine(opt Options) (*Engine, error) {
	m, err := newMetrics(opt.Meter)
	if err != nil {
		return nil, err
	}
	if err := registerGauges(opt.Meter, opt.Pool, opt.Clock); err != nil {
		return nil, err
	}
	return &Engine{
		opt:     opt,
		log:     opt.Logger,
		pool:    opt.Pool,
		clock:   opt.Clock,
		opday:   flight.OpDay{Zone: opt.Zone, CutoffHour: opt.CutoffHour},
		wake:    make(chan struct{}, 1),
		metrics: m,
	}, nil
}

// loops returns the processor's loops in start order.
func (e *Engine) loops() []*lifecycle.Service {
	return []*lifecycle.Service{
		e.executorService(),
		e.acksService(),
		e.inboxService(),
		e.maintenanceService(),
		e.requestsService(),
	}
}

// Wake makes the executor look at the head now.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// backoff returns the wait after the n-th failed attempt (n ≥ 1).
func (e *Engine) backoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	b := e.opt.Backoff
	d := b[len(b)-1]
	if n <= len(b) {
		d = b[n-1]
	}
	if d > e.opt.BackoffCap {
		d = e.opt.BackoffCap
	}
	return d
}
