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

// Services returns the loops in start order.
func (e *Engine) Services() []*lifecycle.Service {
	return []*lifecycle.Service{
		e.executorService(),
		e.acksService(),
		e.inboxService(),
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
