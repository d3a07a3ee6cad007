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
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
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
	"msgexchange/services/internal/rpctrace"
)

// ServiceName is the name of the control plane's lifecycle service.
const ServiceName = "control-grpc"

// readyTimeout bounds the PostgreSQL ping of Ready.
const readyTimeout = 3 * time.Second

// Limits of the gRPC server (R-K6). They bound what one caller can make
// the control plane hold; every legitimate call stays far below them.
const (
	// MaxRecvMsgSize is the largest request message accepted; a larger one
	// is refused with RESOURCE_EXHAUSTED before it is decoded. The largest
	// legitimate request, a re-queue of admin.MaxRequeueIDs outbox IDs
	// (at most 10 bytes each) with the longest operator and reason, is
	// about 110 KiB.
	MaxRecvMsgSize = 256 << 10
	// MaxConcurrentStreams is the number of calls one connection may have
	// in flight; a service or msgxctl has one or two.
	MaxConcurrentStreams = 64
)

// keepaliveEnforcement refuses clients that ping more often than every 10
// s (a ping flood is answered with GOAWAY); pings between calls are
// allowed, for lease clients that hold a connection across renewals.
var keepaliveEnforcement = keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}

// keepaliveServer closes connections without a call for 15 minutes, and
// pings a silent connection after 2 minutes, dropping it when the ping is
// not answered within 20 s (a peer that vanished without closing).
var keepaliveServer = keepalive.ServerParameters{
	MaxConnectionIdle: 15 * time.Minute,
	Time:              2 * time.Minute,
	Timeout:           20 * time.Second,
}

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
	// Tracing is the process's tracer provider: every call gets a gRPC
	// server span (otelgrpc, the rpc.* semantic conventions), continuing
	// the caller's W3C trace context (R-N2). nil traces nothing.
	Tracing trace.TracerProvider
	// IgnoredTypes are the TYPEs on the processor's ignore list
	// (processor.pipeline.ignore-types of the same configuration, R-B9):
	// an RQRD for one of them is refused (R-C12). nil refuses none.
	IgnoredTypes []string
}

// Service is the control plane: a gRPC server with AdminService, the
// standard health service and server reflection.
type Service struct {
	cfg     Config
	creds   *interceptor.Credentials // nil without authentication
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

	var creds *interceptor.Credentials
	if cfg.Authenticated() {
		var err error
		if creds, err = interceptor.NewCredentials(cfg.TokenFile, cfg.AuthToken.Reveal()); err != nil {
			return nil, fmt.Errorf("loading control-plane credentials: %w", err)
		}
	} else {
		logger.Warn("control-plane authentication is DISABLED (control.insecure-no-auth); never run like this outside development")
	}
	auth := interceptor.NewAuth(creds, logger)
	obs, err := interceptor.NewObserve(logger, deps.Meter)
	if err != nil {
		return nil, fmt.Errorf("creating control-plane metrics: %w", err)
	}
	opts := []grpc.ServerOption{
		// Authentication first, from the headers, before any request body
		// is read (R-K6).
		grpc.InTapHandle(auth.Tap()),
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepaliveEnforcement),
		grpc.KeepaliveParams(keepaliveServer),
		// Observe runs outermost so that refused calls are logged and
		// counted too; Guard next, so that a panic anywhere inside,
		// authentication included, becomes an Internal error with a stable
		// message.
		grpc.ChainUnaryInterceptor(obs.Unary(), interceptor.NewGuard(logger).Unary(), auth.Unary()),
		grpc.ChainStreamInterceptor(obs.Stream(), interceptor.NewGuard(logger).Stream(), auth.Stream()),
	}
	// A stats handler, not an interceptor: it sees every call, refused
	// ones included, with the transport's timing.
	opts = append(opts, rpctrace.ServerOptions(deps.Tracing)...)
	if cfg.TLS.On() {
		tlsCfg, err := cfg.TLS.ServerConfig()
		if err != nil {
			return nil, fmt.Errorf("loading control-plane TLS: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	server := grpc.NewServer(opts...)
	controlv1.RegisterAdminServiceServer(server, admin.NewServer(deps.Postgres, deps.Clock, logger, cfg.QueryTimeout))
	controlv1.RegisterInspectServiceServer(server, admin.NewInspectServer(deps.Postgres, logger, cfg.QueryTimeout))
	controlv1.RegisterMaintenanceServiceServer(server, admin.NewMaintenanceServer(deps.Postgres, deps.Clock, logger, cfg.QueryTimeout))
	controlv1.RegisterReplayServiceServer(server, replay.NewServer(deps.Postgres, deps.Clock, logger, cfg.QueryTimeout))
	zone, _ := time.LoadLocation(cfg.Zone) // validated above
	controlv1.RegisterRequestServiceServer(server, requests.NewServer(deps.Postgres, deps.Clock, logger, cfg.QueryTimeout, zone, deps.IgnoredTypes))
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
		creds:   creds,
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
	attrs := []any{"addr", ln.Addr().String(), "auth", s.creds != nil, "tls", s.cfg.TLS.On(), "mutual_tls", s.cfg.TLS.ClientCAFile != ""}
	if s.creds != nil {
		attrs = append(attrs, "token_file", s.cfg.TokenFile, "principals", s.creds.Principals(), "fixed_token", s.cfg.AuthToken.Reveal() != "")
	}
	s.logger.Info("grpc listening", attrs...)
	return nil
}

// ReloadCredentials re-reads the token file now; the running service also
// does every control.token-reload-interval. It reports whether the
// credentials changed. A file that cannot be read or parsed leaves the
// previous credentials valid and is reported (and logged).
func (s *Service) ReloadCredentials() (bool, error) {
	if s.creds == nil {
		return false, nil
	}
	changed, err := s.creds.Reload()
	switch {
	case err != nil:
		s.logger.Error("control-plane token file not reloaded; the previous tokens stay valid", "err", err)
	case changed:
		s.logger.Info("control-plane token file reloaded", "path", s.cfg.TokenFile, "credentials", s.creds.Len(), "principals", s.creds.Principals())
	}
	return changed, err
}

// running serves until ctx is done, re-checking PostgreSQL every
// HealthCheckInterval, then stops gracefully within ShutdownTimeout.
func (s *Service) running(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.server.Serve(s.ln) }()
	tick := time.NewTicker(s.cfg.HealthCheckInterval)
	defer tick.Stop()
	reload := time.NewTicker(s.cfg.TokenReloadInterval)
	defer reload.Stop()
	for {
		select {
		case <-reload.C:
			_, _ = s.ReloadCredentials() // logged; the previous tokens stay valid
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
