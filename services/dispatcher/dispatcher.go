package dispatcher

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
	"msgexchange/services/dispatcher/internal/relay"
)

// Config is the dispatcher's configuration.
type Config struct {
	Delivery DeliveryConfig `yaml:"delivery"`
	Mailbox  MailboxConfig  `yaml:"mailbox"`
	Schd     SchdConfig     `yaml:"schd"`
	Shadow   bool           `yaml:"shadow"`
	// StallLimit is how long a loop — a target's, the notification
	// listener or the mailbox census — may stay stalled (refused by the
	// broker, the mailbox or PostgreSQL in a way no wait cures) before the
	// process exits for its supervisor to restart it (R-L8).
	StallLimit time.Duration `yaml:"stall_limit"`
}

// DeliveryConfig tunes the Kafka relays.
type DeliveryConfig struct {
	Batch       int           `yaml:"batch"`
	MaxAttempts int           `yaml:"max_attempts"`
	BackoffMin  time.Duration `yaml:"backoff_min"`
	BackoffMax  time.Duration `yaml:"backoff_max"`
}

// MailboxConfig tunes the processed-marker writer (R-D4).
type MailboxConfig struct {
	ProcessedValue      string        `yaml:"processed_value"`
	Zone                string        `yaml:"zone"`
	BackfillMaxAttempts int           `yaml:"backfill_max_attempts"`
	BackfillBackoffMin  time.Duration `yaml:"backfill_backoff_min"`
	BackfillBackoffMax  time.Duration `yaml:"backfill_backoff_max"`
	// BackfillOutageRetryMax caps the wait between marker and COUTMSGS
	// tries while the mailbox is unreachable (R-L2) or refuses the
	// dispatcher's account or a table (R-L8). Default 5s.
	BackfillOutageRetryMax time.Duration `yaml:"backfill_outage_retry_max"`
	// OverdueBackfill is R: a marker still failing this long after its
	// message finished stops automatic retries at once (R-D4). Default 30d.
	OverdueBackfill time.Duration `yaml:"overdue_backfill"`
}

// SchdConfig tunes the batched latest-state relay to the schd topic (R-D1).
type SchdConfig struct {
	// FlushPeriod is how often the pending schd rows are flushed. Default 3s.
	FlushPeriod time.Duration `yaml:"flush_period"`
	// FlushLimit is the largest number of records (one per FLID) one flush
	// produces; the rest waits for the next flush. Default 500.
	FlushLimit int `yaml:"flush_limit"`
}

// RegisterFlags registers the dispatcher's flags.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.IntVar(&c.Delivery.Batch, prefix+"delivery.batch", 1024, "outbox rows read and produced per batch (as the processor's pipeline.batch: one drain per executed batch; a drain costs two PostgreSQL round trips, R-M2)")
	fs.IntVar(&c.Delivery.MaxAttempts, prefix+"delivery.max-attempts", 10, "attempts before an outbox row becomes DEAD (dead-letter)")
	fs.DurationVar(&c.Delivery.BackoffMin, prefix+"delivery.backoff-min", time.Second, "first retry delay of a failed outbox row; doubles per attempt (or, while a dependency is unreachable, per failed try of the target), with jitter")
	fs.DurationVar(&c.Delivery.BackoffMax, prefix+"delivery.backoff-max", time.Minute, "largest retry delay of a failed outbox row (at most 1m: an outage is retried at least once a minute, R-L2)")
	fs.StringVar(&c.Mailbox.ProcessedValue, prefix+"mailbox.processed-value", "PROCESSED", "CMINMSGS_STATUS written with the processed marker")
	fs.StringVar(&c.Mailbox.Zone, prefix+"mailbox.zone", "Asia/Shanghai", "airport time zone of mailbox timestamps")
	fs.IntVar(&c.Mailbox.BackfillMaxAttempts, prefix+"pipeline.backfill-max-attempts", 10, "marker attempts before automatic retries stop (an operator can resume)")
	fs.DurationVar(&c.Mailbox.BackfillBackoffMin, prefix+"pipeline.backfill-backoff-min", 30*time.Second, "first retry delay of a failed marker write; doubles per attempt")
	fs.DurationVar(&c.Mailbox.BackfillBackoffMax, prefix+"pipeline.backfill-backoff-max", 15*time.Minute, "largest retry delay of a marker write the mailbox refused for its row (an error other than unreachable, access denied or a missing table or column, which are retried like an outage)")
	fs.DurationVar(&c.Mailbox.BackfillOutageRetryMax, prefix+"pipeline.backfill-outage-retry-max", 5*time.Second, "largest wait between marker and COUTMSGS tries while the mailbox is unreachable, or refuses the dispatcher's account or misses a table or column (the loop then stalled, R-L8); such tries are never counted against backfill-max-attempts (R-L2), and markers resume at most this long after the mailbox returns (at most 1m)")
	fs.DurationVar(&c.Mailbox.OverdueBackfill, prefix+"pipeline.overdue-backfill", 30*24*time.Hour, "R: a marker write still failing this long after its message finished (our clock, never the mailbox's) stops automatic retries at once, DEAD with outcome overdue (720h = 30 days; an operator can resume)")
	fs.DurationVar(&c.Schd.FlushPeriod, prefix+"schd.flush-period", 3*time.Second, "how often the latest state of every changed flight is flushed to the schd topic")
	fs.IntVar(&c.Schd.FlushLimit, prefix+"schd.flush-limit", 500, "most records (one per flight) produced to schd per flush; the rest goes in the next flush")
	fs.DurationVar(&c.StallLimit, prefix+"stall-limit", relay.DefaultStallLimit, "longest a loop (a target's, the notification listener, the mailbox census) may stay stalled (the broker refuses its producer — an authorization failure, an unsupported request —, the mailbox or PostgreSQL refuses access or misses a table) before the process exits for its supervisor to restart it; it reports not ready from the first refusal, and an unreachable dependency is not a stall (R-L8)")
	fs.BoolVar(&c.Shadow, prefix+"shadow", false, "shadow mode, beside the predecessor (R-L6): mailbox markers and outbound requests (COUTMSGS) are settled as shadowed, never written")
}

// Validate reports every invalid value.
func (c *Config) Validate() error {
	var errs []error
	if c.Delivery.Batch < 1 {
		errs = append(errs, errors.New("delivery.batch: must be at least 1"))
	}
	if c.Delivery.MaxAttempts < 1 || c.Mailbox.BackfillMaxAttempts < 1 {
		errs = append(errs, errors.New("delivery.max-attempts and pipeline.backfill-max-attempts: must be at least 1"))
	}
	if c.Delivery.BackoffMin <= 0 || c.Delivery.BackoffMax < c.Delivery.BackoffMin || c.Delivery.BackoffMax > time.Minute {
		errs = append(errs, errors.New("delivery.backoff-min/-max: need 0 < min <= max <= 1m (an outage is retried at least once a minute, R-L2)"))
	}
	if c.Mailbox.BackfillOutageRetryMax <= 0 || c.Mailbox.BackfillOutageRetryMax > time.Minute {
		errs = append(errs, errors.New("pipeline.backfill-outage-retry-max: need 0 < value <= 1m, e.g. 5s (R-L2)"))
	}
	if c.Mailbox.BackfillBackoffMin <= 0 || c.Mailbox.BackfillBackoffMax < c.Mailbox.BackfillBackoffMin {
		errs = append(errs, errors.New("pipeline.backfill-backoff-min/-max: need 0 < min <= max"))
	}
	if c.Mailbox.OverdueBackfill < time.Hour {
		errs = append(errs, fmt.Errorf("pipeline.overdue-backfill %v: must be at least 1h, e.g. 720h (30 days)", c.Mailbox.OverdueBackfill))
	}
	if c.Schd.FlushPeriod <= 0 {
		errs = append(errs, errors.New("schd.flush-period: must be positive, e.g. 3s"))
	}
	if c.Schd.FlushLimit < 1 {
		errs = append(errs, errors.New("schd.flush-limit: must be at least 1, e.g. 500"))
	}
	if c.StallLimit <= 0 {
		errs = append(errs, fmt.Errorf("stall-limit %v: must be positive, e.g. 1m", c.StallLimit))
	}
	if c.Mailbox.ProcessedValue == "" {
		errs = append(errs, errors.New("mailbox.processed-value: must not be empty"))
	}
	if _, err := time.LoadLocation(c.Mailbox.Zone); err != nil {
		errs = append(errs, fmt.Errorf("mailbox.zone: %w", err))
	}
	return errors.Join(errs...)
}

// Deps are the dispatcher's collaborators.
type Deps struct {
	Logger   *slog.Logger
	Clock    clock.Clock
	Meter    metric.Meter
	Postgres *pgxpool.Pool
	Mailbox  *sql.DB
	Kafka    kafka.Config
	// Elector makes each target single-active under its own lease
	// ("dispatcher/<target>") and fences its writes (R-B8). The binary
	// always sets it (R-F6); only tests of the dispatcher alone leave it nil.
	Elector relay.Elector
}

// Service is a running dispatcher.
type Service struct {
	r      *relay.Relay
	census *relay.Census
	pool   *pgxpool.Pool
	mb     *sql.DB
	lease  readier             // nil without an elector that tells
	kafka  *kafka.Reachability // nil when not wired (tests)
}

// New builds the dispatcher.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r, err := relay.New(relay.Options{
		Logger: deps.Logger.With("component", "dispatcher"), Clock: deps.Clock, Meter: deps.Meter,
		Pool: deps.Postgres, Mailbox: deps.Mailbox, Kafka: deps.Kafka,
		Batch: cfg.Delivery.Batch, MaxAttempts: cfg.Delivery.MaxAttempts,
		BackoffMin: cfg.Delivery.BackoffMin, BackoffMax: cfg.Delivery.BackoffMax,
		ProcessedValue: cfg.Mailbox.ProcessedValue, BackfillMaxAttempts: cfg.Mailbox.BackfillMaxAttempts,
		BackfillBackoffMin: cfg.Mailbox.BackfillBackoffMin, BackfillBackoffMax: cfg.Mailbox.BackfillBackoffMax,
		BackfillOutageRetryMax: cfg.Mailbox.BackfillOutageRetryMax,
		OverdueBackfill:        cfg.Mailbox.OverdueBackfill,
		Shadow:                 cfg.Shadow,
		Elector:                deps.Elector,
		SchdFlushPeriod:        cfg.Schd.FlushPeriod, SchdFlushLimit: cfg.Schd.FlushLimit,
		StallLimit: cfg.StallLimit,
	})
	if err != nil {
		return nil, err
	}
	census, err := relay.NewCensus(relay.CensusOptions{
		Logger: deps.Logger.With("component", "dispatcher-census"), Clock: deps.Clock,
		Pool: deps.Postgres, Mailbox: deps.Mailbox, StallLimit: cfg.StallLimit,
	})
	if err != nil {
		return nil, err
	}
	// The relay exports its loops' progress (the targets' and the
	// listener's); the census runs beside it and exports its own, so that
	// msgx_loop_stalled_seconds covers every loop of the process (R-L8).
	meter := deps.Meter
	if meter == nil {
		meter = noop.NewMeterProvider().Meter("dispatcher")
	}
	if err := progress.RegisterMetrics(meter, census.Progress()); err != nil {
		return nil, fmt.Errorf("creating dispatcher: %w", err)
	}
	svc := &Service{r: r, census: census, pool: deps.Postgres, mb: deps.Mailbox, kafka: deps.Kafka.Reach}
	svc.lease, _ = deps.Elector.(readier)
	return svc, nil
}

// Services returns the notification listener, one loop per target and
// the mailbox census loop (R-L6), which runs on every instance.
func (s *Service) Services() []*lifecycle.Service {
	return append(s.r.Services(), s.census.Service())
}

// readier is an Elector that tells whether the control plane answers its
// lease calls (lease.Elector.Ready).
type readier interface{ Ready() error }

// Ready reports whether PostgreSQL and the mailbox answer, the brokers
// answer the dispatcher's Kafka clients (kafka.Reachability), no loop —
// a target's, the notification listener or the census — is stalled by a
// refusal no wait cures (R-L8), and the control plane answers the lease
// calls: without them every target lost its term or cannot take one, or
// cannot deliver, and nothing is delivered (R-M2).
func (s *Service) Ready(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pinging postgres: %w", err)
	}
	if err := s.mb.PingContext(ctx); err != nil {
		return fmt.Errorf("pinging mailbox: %w", err)
	}
	if s.kafka != nil {
		if err := s.kafka.Ready(); err != nil {
			return err
		}
	}
	if err := errors.Join(s.r.Progress(), s.census.Progress().Err()); err != nil {
		return err // a loop is refused (R-L8)
	}
	if s.lease != nil {
		return s.lease.Ready()
	}
	return nil
}
