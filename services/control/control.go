package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"msgexchange/libs/clock"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/logging"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/admin"
	"msgexchange/services/control/internal/dbhealth"
	"msgexchange/services/control/internal/interceptor"
	"msgexchange/services/control/internal/lease"
	"msgexchange/services/control/internal/replay"
	"msgexchange/services/control/internal/requests"
)

// ServiceName is the name of the control plane's lifecycle service.
const ServiceName = "control-grpc"

// readyTimeout bounds the PostgreSQL ping of Ready.
const readyTimeout = 3 * time.Second

// Deps are the control plane's injected dependencies.
type Deps struct {
	// Logger receives the control plane's logs; nil discards them.
	Logger *slog.Logger
	// Clock supplies "now" for backlog ages; nil means the wall clock.
	Clock clock.Clock
	// Meter records msgx_control_rpc_duration_seconds; nil records nothing.
	Meter metric.Meter
	// Postgres is the pipeline's database, read by every call. Required;
	// the caller owns it and closes it after the service stopped.
	Postgres *pgxpool.Pool
}

// Service is the control plane: a gRPC server with AdminService, the
// standard health service and server reflection.
type Service struct {
	cfg     Config
	logger  *slog.Logger
	db      *pgxpool.Pool
	server  *grpc.Server
	health  *health.Server
	watcher *dbhealth.Watcher
	svc     *lifecycle.Service

	ln   net.Listener
	addr atomic.Value // string: the bound address once listening
}

// New validates cfg and builds the control plane. Nothing listens until the
// service from Services is started.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validating control config: %w", err)
	}
	if deps.Postgres == nil {
		return nil, ErrNoPostgres
	}
	if deps.Logger == nil {
		deps.Logger = logging.Discard()
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real{}
	}
	if deps.Meter == nil {
		deps.Meter = noop.NewMeterProvider().Meter("control")
	}
	logger := deps.Logger.With("component", "control")

	token := cfg.AuthToken.Reveal()
	if token == "" {
		logger.Warn("control-plane authentication is DISABLED (control.insecure-no-auth); never run like this outside development")
	}
	auth := interceptor.NewAuth(token, logger)
	obs, err := interceptor.NewObserve(logger, deps.Meter)
	if err != nil {
		return nil, fmt.Errorf("creating control-plane metrics: %w", err)
	}
	// Observe runs outermost so that refused calls are logged and counted too.
	server := grpc.NewServer(
		grpc.ChainUnaryInterceptor(obs.Unary(), auth.Unary()),
		grpc.ChainStreamInterceptor(obs.Stream(), auth.Stream()),
	)
	controlv1.RegisterAdminServiceServer(server, admin.NewServer(deps.Postgres, deps.Clock, logger, cfg.QueryTimeout))
	controlv1.RegisterReplayServiceServer(server, replay.NewServer(deps.Postgres, deps.Clock, logger, cfg.QueryTimeout))
	zone, _ := time.LoadLocation(cfg.Zone) // validated above
	controlv1.RegisterRequestServiceServer(server, requests.NewServer(deps.Postgres, deps.Clock, logger, cfg.QueryTimeout, zone))
	controlv1.RegisterLeaseServiceServer(server, lease.NewServer(deps.Postgres, logger, cfg.QueryTimeout, lease.DefaultLockTimeout))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(server, hs)
	reflection.Register(server)

	// Every service reports NOT_SERVING until the first database check.
	names := []string{"", controlv1.AdminService_ServiceDesc.ServiceName}
	for _, n := range names {
		hs.SetServingStatus(n, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	s := &Service{
		cfg:     cfg,
		logger:  logger,
		db:      deps.Postgres,
		server:  server,
		health:  hs,
		watcher: dbhealth.New(deps.Postgres, hs, names, readyTimeout, logger),
	}
	s.addr.Store("")
	s.svc = lifecycle.NewService(ServiceName, s.starting, s.running, nil)
	return s, nil
}

// Services returns the gRPC server's lifecycle service.
func (s *Service) Services() []*lifecycle.Service { return []*lifecycle.Service{s.svc} }

// Ready reports whether PostgreSQL answers a ping.
func (s *Service) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		return fmt.Errorf("pinging postgres: %w", err)
	}
	return nil
}

// GRPCAddr returns the address the server listens on (useful with port 0),
// or "" before the service started.
func (s *Service) GRPCAddr() string { return s.addr.Load().(string) }

// starting opens the listener, so that a busy port fails the start, and
// sets the first health status.
func (s *Service) starting(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.GRPCAddr, err)
	}
	s.ln = ln
	s.addr.Store(ln.Addr().String())
	s.watcher.Check(ctx)
	s.logger.Info("grpc listening", "addr", ln.Addr().String(), "auth", s.cfg.AuthToken.Reveal() != "")
	return nil
}

// running serves until ctx is done, re-checking PostgreSQL every
// HealthCheckInterval, then stops gracefully within ShutdownTimeout.
func (s *Service) running(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.server.Serve(s.ln) }()
	tick := time.NewTicker(s.cfg.HealthCheckInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			s.health.Shutdown()
			s.server.Stop()
			return fmt.Errorf("serving grpc: %w", err)
		case <-tick.C:
			s.watcher.Check(ctx)
		case <-ctx.Done():
			s.stop()
			// Serve may not have begun before the stop; then it reports
			// ErrServerStopped, which is the requested outcome.
			if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return fmt.Errorf("serving grpc: %w", err)
			}
			return nil
		}
	}
}

// stop reports NOT_SERVING, lets calls in flight finish for at most
// ShutdownTimeout and then cuts the rest off.
func (s *Service) stop() {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.server.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(s.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.logger.Warn("control-plane calls still running after the shutdown timeout; cutting them off", "timeout", s.cfg.ShutdownTimeout)
		s.server.Stop()
		<-done
	}
	s.logger.Info("grpc stopped")
}
