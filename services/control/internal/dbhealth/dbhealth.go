package dbhealth

import (
	"context"
	"log/slog"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Pinger is the database check; *pgxpool.Pool satisfies it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// StatusSetter receives the status; *health.Server satisfies it.
type StatusSetter interface {
	SetServingStatus(service string, status healthpb.HealthCheckResponse_ServingStatus)
}

// Watcher pings the database and sets every named service (including "",
// the server as a whole) to SERVING or NOT_SERVING. Its owner calls Check on
// its own schedule (the control plane: every control.health-check-interval).
type Watcher struct {
	db       Pinger
	health   StatusSetter
	services []string
	timeout  time.Duration
	logger   *slog.Logger

	last healthpb.HealthCheckResponse_ServingStatus
}

// New returns a Watcher whose pings each get timeout.
func New(db Pinger, health StatusSetter, services []string, timeout time.Duration, logger *slog.Logger) *Watcher {
	return &Watcher{
		db:       db,
		health:   health,
		services: services,
		timeout:  timeout,
		logger:   logger,
	}
}

// Check pings once and publishes the result. It returns the status set.
func (w *Watcher) Check(ctx context.Context) healthpb.HealthCheckResponse_ServingStatus {
	pctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	st := healthpb.HealthCheckResponse_SERVING
	err := w.db.Ping(pctx)
	if err != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	if ctx.Err() != nil {
		// Shutting down: a ping cut short says nothing about the database.
		return w.last
	}
	if st != w.last {
		if err != nil {
			w.logger.Warn("postgres unreachable; control plane NOT_SERVING", "err", err)
		} else {
			w.logger.Info("postgres reachable; control plane SERVING")
		}
		w.last = st
	}
	for _, s := range w.services {
		w.health.SetServingStatus(s, st)
	}
	return st
}
