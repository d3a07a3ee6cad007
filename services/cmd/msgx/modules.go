package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"msgexchange/libs/adminhttp"
	"msgexchange/libs/clock"
	"msgexchange/libs/httpserver"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/logging"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/pgxutil"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/telemetry"
	"msgexchange/migrations"
	"msgexchange/services/control"
	"msgexchange/services/dispatcher"
	"msgexchange/services/ingest"
	"msgexchange/services/internal/rpctrace"
	"msgexchange/services/processor"
	"msgexchange/services/projector"
)

// app is the composition root: the only place that constructs shared
// dependencies and the services of the selected targets.
type app struct {
	cfg     *Config
	log     *slog.Logger
	tel     *telemetry.Telemetry
	clock   clock.Clock
	pg      *pgxpool.Pool
	mailbox *sql.DB
	redis   *redis.Client
	elector *lease.Elector

	services []*lifecycle.Service
	readies  []func(context.Context) error
	closers  []func()
	mux      *http.ServeMux
}

// module dependencies per target: which shared clients a target needs.
var moduleDeps = map[string][]string{
	"migrate":    {"postgres"},
	"processor":  {"postgres", "kafka", "lease"},
	"dispatcher": {"postgres", "mysql", "kafka", "lease"},
	"projector":  {"postgres", "redis", "kafka"},
	"ingest":     {"mysql", "kafka", "lease"},
	"control":    {"postgres"},
}

// runApp runs the selected targets until ctx ends, logging to logOut.
func runApp(ctx context.Context, cfg *Config, logOut io.Writer) error {
	clk := clock.Real{}
	// One level for the whole process, changed at run time on the admin
	// port (R-N2): every logger is derived from this one.
	level := logging.NewLevel(cfg.Log.SlogLevel(), clk)
	log := logging.NewLeveled(logOut, cfg.Log.Format, level).With("service", "msgx")
	a := &app{cfg: cfg, log: log, clock: clk, mux: http.NewServeMux()}
	defer a.close()
	if err := a.init(ctx); err != nil {
		return err
	}
	targets, _ := cfg.targets()
	if len(targets) == 1 && targets[0] == "migrate" {
		log.Info("migrations applied")
		return nil
	}
	ready := func(ctx context.Context) error {
		var errs []error
		for _, r := range a.readies {
			errs = append(errs, r(ctx))
		}
		return errors.Join(errs...)
	}
	var mgr *lifecycle.Manager
	var draining atomic.Bool
	a.mux.Handle("GET /metrics", a.tel.Handler())
	httpserver.Health(a.mux, func(ctx context.Context) error {
		if draining.Load() {
			return errors.New("shutting down")
		}
		if err := mgr.Ready(); err != nil {
			return err
		}
		return ready(ctx)
	})
	handler, err := httpserver.Instrument(a.mux, a.tel.Meter("http"))
	if err != nil {
		return err
	}
	srv := httpserver.New("http", cfg.HTTPAddr, handler, log)
	// The admin port (pprof, the log level), when on, is a listener of its
	// own, never the public http.addr: started first and stopped last, so
	// that a start or a stop that hangs can be profiled.
	var services []*lifecycle.Service
	if admin := adminhttp.New(cfg.Admin, level, log); admin != nil {
		services = append(services, admin)
	}
	services = append(append(services, a.services...), srv)
	mgr = lifecycle.NewManager(log, services...).WithStopTimeout(cfg.ShutdownTimeout)

	// On SIGTERM: report not-ready first, wait shutdown-delay so load
	// balancers stop sending work, then stop every service.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-runCtx.Done():
			return
		}
		draining.Store(true)
		if cfg.ShutdownDelay > 0 {
			log.Info("draining before shutdown", "delay", cfg.ShutdownDelay)
			t := time.NewTimer(cfg.ShutdownDelay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-runCtx.Done():
			}
		}
		cancel()
	}()
	log.Info("starting", "targets", targets, "http", cfg.HTTPAddr, "admin", cfg.Admin.Addr)
	return mgr.Run(runCtx)
}

// closeTimeout bounds closing the clients: after a stop deadline passed,
// abandoned work may still hold a connection that a pool's Close waits
// for, and the process must exit all the same.
const closeTimeout = 3 * time.Second

func (a *app) close() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := len(a.closers) - 1; i >= 0; i-- {
			a.closers[i]()
		}
	}()
	select {
	case <-done:
	case <-time.After(closeTimeout):
		a.log.Error("closing the clients did not finish; exiting without them", "timeout", closeTimeout)
	}
}

func (a *app) needs(dep string) bool {
	ts, _ := a.cfg.targets()
	for _, t := range ts {
		for _, d := range moduleDeps[t] {
			if d == dep {
				return true
			}
		}
	}
	return false
}

func (a *app) init(ctx context.Context) error {
	var err error
	b := currentBuild()
	if a.tel, err = telemetry.New(telemetry.Build{Version: b.Version, Commit: b.Commit, GoVersion: b.GoVersion, Platform: b.Platform}); err != nil {
		return err
	}
	// Tracing first: the clients built below (the lease client's gRPC
	// connection, Kafka) take its provider.
	if err := a.initTracing(); err != nil {
		return err
	}
	cfg := a.cfg
	if cfg.has("migrate") || cfg.MigrateOnStart {
		if err := migrations.Up(ctx, cfg.Postgres.URL); err != nil {
			return err
		}
	}
	if a.needs("postgres") {
		pgc := cfg.Postgres
		if ts, err := cfg.targets(); err == nil {
			pgc.ApplicationName = "msgx " + strings.Join(ts, ",")
		}
		if a.pg, err = pgxutil.Connect(ctx, pgc); err != nil {
			return err
		}
		a.closers = append(a.closers, a.pg.Close)
		reg, err := pgxutil.RegisterMetrics(a.tel.Meter("postgres"), a.pg, "postgres")
		if err != nil {
			return err
		}
		a.closers = append(a.closers, func() { _ = reg.Unregister() })
	}
	if a.needs("mysql") {
		loc, err := time.LoadLocation(cfg.Dispatcher.Mailbox.Zone)
		if err != nil {
			return fmt.Errorf("loading mailbox zone: %w", err)
		}
		if a.mailbox, err = mysqlutil.Open(ctx, cfg.Mailbox, loc, a.log); err != nil {
			return err
		}
		a.closers = append(a.closers, func() { _ = a.mailbox.Close() })
	}
	if a.needs("redis") {
		if a.redis, err = redisutil.New(cfg.Redis, a.log); err != nil {
			return err
		}
		a.closers = append(a.closers, func() { _ = a.redis.Close() })
	}
	if a.needs("lease") {
		// lease.token-file, else lease.auth-token, else (all-in-one: the
		// same control plane) control.auth-token; TLS as lease.tls.* says.
		cl, err := cfg.Lease.Dial(cfg.Control.AuthToken.Reveal(), rpctrace.ClientOptions(cfg.Kafka.Tracing)...)
		if err != nil {
			return err
		}
		a.closers = append(a.closers, func() { _ = cl.Close() })
		opts := cfg.Lease.Options(a.log.With("component", "lease"))
		opts.Meter = a.tel.Meter("lease")
		if a.elector, err = lease.NewElector(cl, opts); err != nil {
			return fmt.Errorf("creating lease elector: %w", err)
		}
	}
	if a.needs("kafka") {
		if cfg.Kafka.Metrics, err = kafka.NewMetrics(a.tel.Meter("kafka")); err != nil {
			return err
		}
		cfg.Kafka.Reach = kafka.NewReachability(a.clock, cfg.Kafka.UnreachableAfter)
	}
	targets, _ := cfg.targets() // validated before the start
	if writes := unionKafkaAccess(cfg, targets).Writes; len(writes) > 0 && cfg.Kafka.CreateTopics {
		// The topics the process writes, in the background: a process
		// started during a Kafka outage serves what does not need Kafka
		// instead of exiting (R-N1), and a service's principal needs
		// Create on its own topics only (R-K7).
		tc := kafka.NewTopicCreator(cfg.Kafka, writes, a.log, 100*time.Millisecond, topicRetryMax)
		a.services = append(a.services, tc.Service())
	}
	return a.initServices()
}

// topicRetryMax caps the wait between attempts to create the topics while
// the brokers do not answer.
const topicRetryMax = 10 * time.Second

func (a *app) add(s interface {
	Services() []*lifecycle.Service
	Ready(context.Context) error
}) {
	a.services = append(a.services, s.Services()...)
	a.readies = append(a.readies, s.Ready)
}

func (a *app) initServices() error {
	cfg := a.cfg
	// The control plane first: started first and, the Manager stopping in
	// reverse order, stopped last, so that in an all-in-one process the
	// other services keep their leases (renewed through it) until they
	// have stopped.
	if cfg.has("control") {
		s, err := control.New(cfg.Control, control.Deps{
			Logger: a.log, Clock: a.clock, Meter: a.tel.Meter("control"), Postgres: a.pg, Tracing: a.cfg.Kafka.Tracing,
			IgnoredTypes: cfg.Processor.Pipeline.IgnoredTypes(), // the same configuration's list (R-C12)
		})
		if err != nil {
			return fmt.Errorf("creating control: %w", err)
		}
		a.add(s)
	}
	if cfg.has("processor") {
		s, err := processor.New(cfg.Processor, processor.Deps{
			Logger: a.log, Clock: a.clock, Meter: a.tel.Meter("processor"), Postgres: a.pg, Kafka: cfg.Kafka,
			Elector: a.elector,
		})
		if err != nil {
			return fmt.Errorf("creating processor: %w", err)
		}
		a.add(s)
	}
	if cfg.has("dispatcher") {
		s, err := dispatcher.New(cfg.Dispatcher, dispatcher.Deps{
			Logger: a.log, Clock: a.clock, Meter: a.tel.Meter("dispatcher"), Postgres: a.pg, Mailbox: a.mailbox, Kafka: cfg.Kafka,
			Elector: a.elector,
		})
		if err != nil {
			return fmt.Errorf("creating dispatcher: %w", err)
		}
		a.add(s)
	}
	if cfg.has("projector") {
		s, err := projector.New(cfg.Projector, projector.Deps{
			Logger: a.log, Clock: a.clock, Meter: a.tel.Meter("projector"), Redis: a.redis, KeyPrefix: cfg.Redis.KeyPrefix, Kafka: cfg.Kafka,
			Postgres: a.pg,
		})
		if err != nil {
			return fmt.Errorf("creating projector: %w", err)
		}
		s.RegisterRoutes(a.mux)
		a.add(s)
	}
	if cfg.has("ingest") {
		loc, _ := time.LoadLocation(cfg.Dispatcher.Mailbox.Zone)
		s, err := ingest.New(cfg.Ingest, ingest.Deps{
			Logger: a.log, Clock: a.clock, Meter: a.tel.Meter("ingest"), Mailbox: a.mailbox, Kafka: cfg.Kafka, Location: loc,
			Elector: a.elector,
		})
		if err != nil {
			return fmt.Errorf("creating ingest: %w", err)
		}
		// The compat entry has its own listener, ingest.compat.addr (R-H10).
		a.add(s)
	}
	return nil
}
