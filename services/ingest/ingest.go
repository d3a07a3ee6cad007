package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
	"msgexchange/services/ingest/internal/compat"
	"msgexchange/services/ingest/internal/mailbox"
	"msgexchange/services/ingest/internal/scanner"
)

// ScannerServiceName is the lifecycle name of the scan loop.
const ScannerServiceName = "ingest-scanner"

// kafkaTimeout bounds the start-up metadata request to Kafka.
const kafkaTimeout = 30 * time.Second

// Deps are what the composition root gives the service.
type Deps struct {
	// Logger is the process logger; the service adds component=ingest.
	Logger *slog.Logger
	// Clock drives the republish, gap-window and reconciliation decisions
	// and timestamps.
	Clock clock.Clock
	// Meter creates the msgx_ingest_* instruments.
	Meter metric.Meter
	// Mailbox is the shared mailbox database holding CMINMSGS.
	Mailbox *sql.DB
	// Kafka configures the producer the scanner creates at start.
	Kafka kafka.Config
	// Location is the airport zone the mailbox connection uses; optional,
	// and when set it must be the zone of mailbox.zone.
	Location *time.Location
	// Elector makes the scanner single-active under the "ingest-scanner"
	// lease (R-B8). The binary always sets it (R-F6); only tests of ingest
	// alone leave it nil.
	Elector Elector
	// Holder names this instance in the lease; empty means lease.Holder().
	Holder string
}

// Service is the ingest service: the mailbox scanner (a lifecycle service)
// and the compat HTTP entry.
type Service struct {
	cfg     Config
	deps    Deps
	logger  *slog.Logger
	loc     *time.Location
	mailbox *mailbox.Mailbox
	metrics *scanner.Metrics
	compat  *compat.Handler
	server  *compatServer // nil without compat.addr
	wake    chan struct{}
	loop    *lifecycle.Service
	// progress tracks the scanner (R-L8): stalled while the broker or
	// the mailbox refuses it, which makes the process not ready.
	progress *progress.Tracker

	mu      sync.Mutex
	client  *kgo.Client
	scanner *scanner.Scanner
	// newScanner makes the term's scanner with client: at start, and
	// again when the broker lost inbox records (running).
	newScanner func(context.Context) (*scanner.Scanner, error)
	// closeClient closes client once: when running's context ends (the
	// stop) or in stopping, whichever comes first.
	closeClient func()
	term        *lease.Term // the current lease term; nil without an elector
}

// New validates cfg and builds the service; nothing connects until the
// scanner's lifecycle service starts.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validating ingest config: %w", err)
	}
	var missing []error
	for name, isNil := range map[string]bool{
		"Logger": deps.Logger == nil, "Clock": deps.Clock == nil,
		"Meter": deps.Meter == nil, "Mailbox": deps.Mailbox == nil,
	} {
		if isNil {
			missing = append(missing, fmt.Errorf("%w: Deps.%s", ErrMissingDependency, name))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, fmt.Errorf("creating ingest service: %w", err)
	}
	loc, err := cfg.Mailbox.location()
	if err != nil {
		return nil, fmt.Errorf("creating ingest service: %w", err)
	}
	if deps.Location != nil && deps.Location.String() != loc.String() {
		return nil, fmt.Errorf("creating ingest service: mailbox.zone %q differs from the mailbox connection's zone %q; configure one zone",
			loc.String(), deps.Location.String())
	}
	nets, err := cfg.Compat.Networks()
	if err != nil {
		return nil, fmt.Errorf("creating ingest service: %w", err)
	}
	proxies, err := cfg.Compat.Proxies()
	if err != nil {
		return nil, fmt.Errorf("creating ingest service: %w", err)
	}
	s := &Service{
		cfg:      cfg,
		deps:     deps,
		logger:   deps.Logger.With("component", "ingest"),
		loc:      loc,
		mailbox:  mailbox.New(deps.Mailbox, loc, cfg.Mailbox.StatusFilter).StartingAt(cfg.Mailbox.StartID).Shadowing(cfg.Shadow),
		wake:     make(chan struct{}, 1),
		progress: progress.New(ScannerServiceName, deps.Clock),
	}
	if s.metrics, err = scanner.NewMetrics(deps.Meter); err != nil {
		return nil, fmt.Errorf("creating ingest service: %w", err)
	}
	if err := progress.RegisterMetrics(deps.Meter, s.progress); err != nil {
		return nil, fmt.Errorf("creating ingest service: %w", err)
	}
	compatLog := deps.Logger.With("component", "ingest-compat")
	s.compat, err = compat.New(compat.Config{
		MaxBody:         int64(cfg.Compat.MaxBody),
		AllowedNetworks: nets,
		TrustedProxies:  proxies,
		TokenFile:       cfg.Compat.TokenFile,
		ValidStatus:     cfg.Mailbox.ValidStatus,
		Limits:          cfg.Compat.Limits,
	}, s.mailbox, deps.Clock, s.wakeScanner, deps.Meter, compatLog)
	if err != nil {
		return nil, fmt.Errorf("creating ingest service: %w", err)
	}
	if cfg.Compat.Addr != "" {
		s.server = newCompatServer(cfg.Compat.Addr, s.compat, compatLog)
	}
	s.loop = lifecycle.NewService(ScannerServiceName, s.starting, s.running, s.stopping)
	return s, nil
}

// Services returns the scanner loop, then the compat entry's server when
// compat.addr is set.
//
// With an elector the scanner is single-active under the "ingest-scanner"
// lease (R-B8): a standby waits, and each term starts a fresh scanner (its
// in-memory state is empty, so it republishes the unmarked rows once; the
// processor ignores repeats, R-A5). The compat entry serves on every
// instance either way.
func (s *Service) Services() []*lifecycle.Service {
	var compatSvc []*lifecycle.Service
	if s.server != nil {
		compatSvc = []*lifecycle.Service{s.server.service()}
	}
	if s.deps.Elector == nil {
		return append([]*lifecycle.Service{s.loop}, compatSvc...)
	}
	holder := s.deps.Holder
	if holder == "" {
		holder = lease.Holder()
	}
	return append([]*lifecycle.Service{lifecycle.NewService(ScannerServiceName+"-leader", nil, func(svcCtx context.Context) error {
		// A scanner stalled past its limit ends the service and the
		// process, not only the term, so that the supervisor restarts it
		// (R-L8).
		ctx, stalled := context.WithCancelCause(svcCtx)
		defer stalled(nil)
		err := s.deps.Elector.Run(ctx, LeaseName, holder, func(ctx context.Context, token int64) error {
			// The scanner writes nothing to PostgreSQL; its one side effect,
			// the produce to the inbox topic, waits for the control plane to
			// confirm the term, and the first refusal ends the term (R-H6).
			term, tctx, cancel := lease.NewRemoteTerm(ctx, LeaseName, token, func(ctx context.Context) error {
				return s.deps.Elector.Confirm(ctx, LeaseName, holder, token)
			})
			defer cancel()
			s.mu.Lock()
			s.term = term
			s.mu.Unlock()
			defer func() {
				s.mu.Lock()
				s.term = nil
				s.mu.Unlock()
			}()
			s.logger.Info("ingest scanner lease acquired; active", "token", token)
			loop := lifecycle.NewService(ScannerServiceName, s.starting, s.running, s.stopping)
			err := lifecycle.NewManager(s.logger, loop).Run(tctx)
			if errors.Is(err, progress.ErrStalled) {
				stalled(err)
			} else {
				s.progress.Progressed() // a standby runs no scan that could stall
			}
			if ferr := term.Err(); ferr != nil {
				return ferr
			}
			s.logger.Info("ingest scanner term ended; standby", "err", err)
			return err
		})
		if cause := context.Cause(ctx); errors.Is(cause, progress.ErrStalled) {
			return cause
		}
		return err
	}, nil)}, compatSvc...)
}

// LeaseName is the scanner's lease.
const LeaseName = "ingest-scanner"

// Elector runs fn while this instance holds a lease, and confirms a term
// before each produce (libs/lease.Elector).
type Elector interface {
	Run(ctx context.Context, name, holder string, fn func(ctx context.Context, token int64) error) error
	Confirm(ctx context.Context, name, holder string, token int64) error
}

// CompatHandler is the compat entry POST /cminmsgs/send, the handler the
// compat.addr server serves; tests and embedders may serve it themselves.
// It is never registered on the process's main HTTP server (R-H10).
func (s *Service) CompatHandler() http.Handler { return s.compat }

// CompatAddr is the address the compat entry listens on (useful with port
// 0), or "" before it started or without compat.addr.
func (s *Service) CompatAddr() string {
	if s.server == nil {
		return ""
	}
	return s.server.addr.Load().(string)
}

// Ready reports whether the mailbox table can be read: what the compat
// entry, the one thing an ingest pod's Service sends it, needs; and
// whether the scanner makes progress (R-L8). The brokers are not asked: a
// Kafka outage stops the scanner's produces, which resume when the brokers
// return, but must not take the compat entry out of service (R-N1). A
// refusal no wait cures — the broker refusing the producer, the mailbox
// refusing access — does: it stalls the scanner until an operator acts.
func (s *Service) Ready(ctx context.Context) error {
	if err := s.mailbox.Ping(ctx); err != nil {
		return fmt.Errorf("checking ingest mailbox: %w", err)
	}
	s.mu.Lock()
	client := s.client
	s.mu.Unlock()
	if client == nil && s.deps.Elector == nil {
		return ErrNotStarted
	}
	if err := s.progress.Err(); err != nil {
		return err // the scanner is refused (R-L8)
	}
	return nil // with an elector, a standby's compat entry serves; the scanner waits for its lease
}

// wakeScanner asks for a round now; a pending request already covers it.
func (s *Service) wakeScanner() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Service) starting(ctx context.Context) error {
	topic := s.deps.Kafka.Topics.Inbox
	opts := append(s.deps.Kafka.ClientOpts(s.deps.Logger, "ingest"),
		kgo.DefaultProduceTopic(topic),
		// Every record goes to partition 0 (records set it), whatever the
		// topic's partition count: the inbox order is the mailbox order.
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	s.metrics.Init(ctx, topic)
	s.metrics.SetShadowPositionLost(false)
	limits, err := describeInbox(ctx, opts, topic)
	if err != nil {
		return err
	}
	maxBytes := limits.maxMessageBytes
	client, err := kgo.NewClient(append(opts, kgo.ProducerBatchMaxBytes(maxBytes))...)
	if err != nil {
		return fmt.Errorf("creating ingest kafka producer: %w", err)
	}
	newScanner := func(ctx context.Context) (*scanner.Scanner, error) {
		return s.scannerFor(ctx, client, opts, topic, limits.retention)
	}
	sc, err := newScanner(ctx)
	if err != nil {
		client.Close()
		return err
	}
	s.mu.Lock()
	s.client, s.scanner, s.newScanner = client, sc, newScanner
	s.mu.Unlock()
	s.logger.Info("ingest scanner starting", "topic", topic, "max_batch_bytes", maxBytes,
		"poll_interval", s.cfg.Pipeline.PollInterval, "claim_batch", s.cfg.Pipeline.ClaimBatch)
	return nil
}

// scannerFor makes a scanner that publishes with client to topic. In
// shadow mode it resumes where the inbox's last record says (shadowResume,
// with opts and the topic's retention).
func (s *Service) scannerFor(ctx context.Context, client *kgo.Client, opts []kgo.Opt, topic string, retention time.Duration) (*scanner.Scanner, error) {
	var shadow *scanner.Shadow
	if s.cfg.Shadow {
		var err error
		if shadow, err = s.shadowResume(ctx, opts, topic, retention); err != nil {
			return nil, err
		}
	}
	scfg := scanner.Config{
		ClaimBatch:         s.cfg.Pipeline.ClaimBatch,
		ReadAhead:          s.cfg.Pipeline.ReadAhead,
		FullRescanInterval: s.cfg.Pipeline.FullRescanInterval,
		RepublishAfter:     s.cfg.Pipeline.RepublishAfter,
		GapWindow:          s.cfg.Pipeline.GapWindow,
		Location:           s.loc,
		Tracer:             s.deps.Kafka.Tracer("ingest"),
		Progress:           s.progress,
		StallLimit:         s.cfg.StallLimit,
		Shadow:             shadow,
		Topic:              topic,
		InboxEnd:           scanner.EndOffset(client, topic),
	}
	s.mu.Lock()
	if s.term != nil {
		scfg.Confirm = s.term.Check
	}
	s.mu.Unlock()
	return scanner.New(scfg, s.mailbox, client, s.deps.Clock, s.metrics, s.deps.Logger.With("component", ScannerServiceName)), nil
}

func (s *Service) running(ctx context.Context) error {
	s.mu.Lock()
	sc := s.scanner
	// A publish in flight when the broker went away ignores its context
	// (an idempotent producer): the client closes with the stop, so the
	// stop is never held up by an outage; the rows stay unmarked and are
	// published again after the restart.
	s.closeClient = kafka.CloseOnStop(ctx, s.client)
	newScanner := s.newScanner
	s.mu.Unlock()
	for {
		err := sc.Run(ctx, s.cfg.Pipeline.PollInterval, s.wake)
		if !errors.Is(err, scanner.ErrInboxLost) {
			return err
		}
		// The broker lost inbox records: a new scanner, which remembers
		// nothing, publishes every unmarked row again in mailbox order
		// before any later one (scanner.Run).
		if sc, err = newScanner(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		s.scanner = sc
		s.mu.Unlock()
	}
}

func (s *Service) stopping(error) error {
	s.mu.Lock()
	client, closeClient := s.client, s.closeClient
	s.client, s.scanner, s.closeClient, s.newScanner = nil, nil, nil, nil
	s.mu.Unlock()
	switch {
	case closeClient != nil:
		closeClient()
	case client != nil:
		client.Close()
	}
	return nil
}

// inboxLimits are the inbox topic's settings the scanner depends on.
type inboxLimits struct {
	// maxMessageBytes is max.message.bytes, so that the producer's batches
	// never exceed what the broker accepts and messages up to that size
	// (the mailbox allows 16 MiB) can be published.
	maxMessageBytes int32
	// retention is retention.ms, 0 when unknown or unlimited: how long a
	// shadow run's position outlives its last publication (shadowResume).
	retention time.Duration
}

// describeInbox reads the inbox topic's limits.
func describeInbox(ctx context.Context, opts []kgo.Opt, topic string) (inboxLimits, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return inboxLimits{}, fmt.Errorf("creating kafka admin client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return inboxLimits{}, fmt.Errorf("%w: describing %s: %w", ErrInboxTopic, topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return inboxLimits{}, fmt.Errorf("%w: describing %s: %w", ErrInboxTopic, topic, err)
	}
	if rc.Err != nil {
		return inboxLimits{}, fmt.Errorf("%w: describing %s: %w", ErrInboxTopic, topic, rc.Err)
	}
	var out inboxLimits
	for _, c := range rc.Configs {
		if c.Value == nil {
			continue
		}
		switch c.Key {
		case "max.message.bytes":
			n, err := strconv.ParseInt(*c.Value, 10, 32)
			if err != nil || n < 512 {
				return inboxLimits{}, fmt.Errorf("%w: %s has max.message.bytes %q", ErrInboxTopic, topic, *c.Value)
			}
			out.maxMessageBytes = int32(n)
		case "retention.ms":
			if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil && ms > 0 {
				out.retention = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if out.maxMessageBytes == 0 {
		return inboxLimits{}, fmt.Errorf("%w: %s reports no max.message.bytes", ErrInboxTopic, topic)
	}
	return out, nil
}
