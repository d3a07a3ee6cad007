package processor

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"msgexchange/libs/backoff"
	"msgexchange/services/processor/internal/pipeline"
)

// Config is the processor's configuration.
type Config struct {
	Pipeline PipelineConfig `yaml:"pipeline"`
	Identity IdentityConfig `yaml:"identity"`
	OpDay    OpDayConfig    `yaml:"operation_day"`
	Offsets  OffsetsConfig  `yaml:"offsets"`
	History  HistoryConfig  `yaml:"history"`
	Request  RequestConfig  `yaml:"request"`
}

// PipelineConfig holds the retry and poison parameters (R-B5, R-B9).
type PipelineConfig struct {
	MaxAttempts int `yaml:"max_attempts"`
	// BackoffMin is a FAILED head's first wait; each further attempt
	// doubles it up to BackoffCap, with jitter (libs/backoff, R-B5).
	BackoffMin time.Duration `yaml:"backoff_min"`
	BackoffCap time.Duration `yaml:"backoff_cap"`
	// Backoff is the deprecated per-attempt list ("1s,2s,4s,8s,16s", the
	// last repeating). Still read for one release: set, it stands for
	// backoff-min = its first value and backoff-cap = its last (bounded
	// by backoff-cap), and the processor logs the flags to use instead.
	Backoff       string        `yaml:"backoff"`
	HeadDeadline  time.Duration `yaml:"head_deadline"`
	SnapshotBatch int           `yaml:"snapshot_batch"`
	MaxRecords    int           `yaml:"max_records"`
	Batch         int           `yaml:"batch"`
	IgnoreTypes   string        `yaml:"ignore_types"`
	// RecordRetention: finished, backfilled records are deleted this long
	// after they finished (R-B10).
	RecordRetention time.Duration `yaml:"record_retention"`
	// SelfCheckInterval and SelfCheckGrace: how often the self-check
	// finishes stranded messages, and how old a stranded state must be
	// before it does (R-H4).
	SelfCheckInterval time.Duration `yaml:"self_check_interval"`
	SelfCheckGrace    time.Duration `yaml:"self_check_grace"`
	// StallLimit is how long a Kafka loop (inbox, acks) may stay refused
	// by the brokers before the process exits for its supervisor to
	// restart it (R-L8).
	StallLimit time.Duration `yaml:"stall_limit"`
}

// IgnoredTypes returns the message TYPEs of ignore-types, upper case, in
// the order given, without blanks or repeats. The processor SKIPS them
// (R-B9), and the control plane, reading the same configuration, refuses
// an RQRD for one of them (R-C12): its RESP would be skipped unread.
func (c PipelineConfig) IgnoredTypes() []string {
	var out []string
	for _, t := range strings.Split(c.IgnoreTypes, ",") {
		if t = strings.ToUpper(strings.TrimSpace(t)); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// IdentityConfig controls the identity key (R-B4).
type IdentityConfig struct {
	IncludeDayBoundary bool `yaml:"include_day_boundary"`
}

// OpDayConfig controls operation-day derivation (R-C2).
type OpDayConfig struct {
	Zone       string `yaml:"zone"`
	CutoffHour int    `yaml:"cutoff_hour"`
}

// OffsetsConfig names the processor's Kafka positions.
type OffsetsConfig struct {
	ConsumerName string `yaml:"consumer_name"`
}

// RequestConfig controls the outbound request timers (R-D5,
// G-REQ-TRACK-RETENTION).
type RequestConfig struct {
	RQFDTimeout   time.Duration `yaml:"rqfd_timeout"`
	RQRDTimeout   time.Duration `yaml:"rqrd_timeout"`
	Retention     time.Duration `yaml:"retention"`
	SweepInterval time.Duration `yaml:"sweep_interval"`
}

// RegisterFlags registers the processor's flags.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.IntVar(&c.Pipeline.MaxAttempts, prefix+"pipeline.max-attempts", 5, "failed executions before a message is poisoned, DEAD(EXHAUSTED)")
	fs.DurationVar(&c.Pipeline.BackoffMin, prefix+"pipeline.backoff-min", time.Second, "first retry wait of a failed head; doubles per attempt up to pipeline.backoff-cap, and jitter takes up to half of each wait off")
	fs.DurationVar(&c.Pipeline.BackoffCap, prefix+"pipeline.backoff-cap", 60*time.Second, "upper bound of any retry backoff")
	fs.StringVar(&c.Pipeline.Backoff, prefix+"pipeline.backoff", "", "deprecated, use pipeline.backoff-min and pipeline.backoff-cap: a per-attempt list (1s,2s,4s) read as backoff-min = its first value, backoff-cap = its last")
	fs.DurationVar(&c.Pipeline.HeadDeadline, prefix+"pipeline.head-deadline", 10*time.Minute, "a head stuck longer than this since processing_started_at is poisoned")
	fs.DurationVar(&c.Pipeline.StallLimit, prefix+"pipeline.stall-limit", pipeline.DefaultStallLimit, "longest a Kafka loop (inbox, acks) may stay stalled — the brokers refusing it: an authorization failure, an unsupported request — before the process exits for its supervisor to restart it; it reports not ready from the first refusal, and an unreachable broker is not a stall (R-L8)")
	fs.IntVar(&c.Pipeline.Batch, prefix+"pipeline.batch", pipeline.DefaultBatch, "consecutive due messages executed in one transaction, each with the outcome it would have alone (R-J1); 1 is one transaction per message")
	fs.IntVar(&c.Pipeline.SnapshotBatch, prefix+"pipeline.snapshot-batch", 200, "records of a daily snapshot (SCHD DNLD/RESP) written per transaction (R-C6)")
	fs.IntVar(&c.Pipeline.MaxRecords, prefix+"pipeline.max-records", pipeline.DefaultMaxRecords, "most records (flights, FLOP or reference records) one message may carry; a message with more is DEAD(MALFORMED) naming the limit (R-K4)")
	fs.StringVar(&c.Pipeline.IgnoreTypes, prefix+"pipeline.ignore-types", "LDM,REGN,RSTA,EROR", "message TYPEs that are SKIPPED with a reason and backfilled")
	fs.BoolVar(&c.Identity.IncludeDayBoundary, prefix+"identity.include-day-boundary", false, "add the DTTM day to the identity key SNDR|TYPE|STYP|SEQN")
	fs.StringVar(&c.OpDay.Zone, prefix+"operation-day.zone", "Asia/Shanghai", "airport time zone for operation days")
	fs.IntVar(&c.OpDay.CutoffHour, prefix+"operation-day.cutoff-hour", 0, "hour (0-23) at which an operation day starts")
	fs.StringVar(&c.Offsets.ConsumerName, prefix+"offsets.consumer-name", "processor", "name under which the inbox and ack offsets are stored in consumer_offset")
	c.registerMaintenanceFlags(prefix, fs)
	fs.DurationVar(&c.Request.RQFDTimeout, prefix+"request.rqfd-timeout", pipeline.DefaultRQFDTimeout, "how long a sent RQFD request waits for its SCHD RESP before it expires")
	fs.DurationVar(&c.Request.RQRDTimeout, prefix+"request.rqrd-timeout", pipeline.DefaultRQRDTimeout, "how long a sent RQRD request waits for its reference RESP before it expires")
	fs.DurationVar(&c.Request.Retention, prefix+"request.retention", pipeline.DefaultRequestRetention, "how long closed (DONE, EXPIRED) requests are kept before they are purged")
	fs.DurationVar(&c.Request.SweepInterval, prefix+"request.sweep-interval", pipeline.DefaultRequestSweepInterval, "how often request timeouts and the purge run")
}

// Validate reports every invalid value.
func (c *Config) Validate() error {
	var errs []error
	if c.Pipeline.MaxAttempts < 1 {
		errs = append(errs, errors.New("pipeline.max-attempts: must be at least 1"))
	}
	if _, _, err := c.Pipeline.RetrySchedule(); err != nil {
		errs = append(errs, err)
	}
	if c.Pipeline.HeadDeadline <= 0 {
		errs = append(errs, errors.New("pipeline.head-deadline: must be positive"))
	}
	if c.Pipeline.StallLimit < time.Second {
		errs = append(errs, fmt.Errorf("pipeline.stall-limit: %s must be at least 1s (default %s)", c.Pipeline.StallLimit, pipeline.DefaultStallLimit))
	}
	if c.Pipeline.Batch < 1 {
		errs = append(errs, fmt.Errorf("pipeline.batch: must be at least 1 (default %d; 1 is one transaction per message)", pipeline.DefaultBatch))
	}
	if c.Pipeline.SnapshotBatch < 1 {
		errs = append(errs, errors.New("pipeline.snapshot-batch: must be at least 1 (default 200)"))
	}
	if c.Pipeline.MaxRecords < 1 {
		errs = append(errs, fmt.Errorf("pipeline.max-records: must be at least 1 (default %d)", pipeline.DefaultMaxRecords))
	}
	if _, err := time.LoadLocation(c.OpDay.Zone); err != nil {
		errs = append(errs, fmt.Errorf("operation-day.zone: %w", err))
	}
	if c.OpDay.CutoffHour < 0 || c.OpDay.CutoffHour > 23 {
		errs = append(errs, errors.New("operation-day.cutoff-hour: must be 0..23"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"request.rqfd-timeout", c.Request.RQFDTimeout},
		{"request.rqrd-timeout", c.Request.RQRDTimeout},
		{"request.retention", c.Request.Retention},
		{"request.sweep-interval", c.Request.SweepInterval},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be positive, e.g. 30s", d.name, d.v))
		}
	}
	errs = append(errs, c.validateMaintenance()...)
	if c.Offsets.ConsumerName == "" {
		errs = append(errs, errors.New("offsets.consumer-name: must not be empty"))
	}
	return errors.Join(errs...)
}

// RetrySchedule returns the wait of a FAILED head by attempt (R-B5):
// doubling from backoff-min to backoff-cap with libs/backoff's default
// jitter. When the deprecated pipeline.backoff list is set, its first value
// stands for backoff-min and its last, bounded by backoff-cap, for the cap
// (the default list 1s,…,16s gives the same waits as before, now with
// jitter), and deprecation names the flags that replace it, for the log.
func (c PipelineConfig) RetrySchedule() (s backoff.Schedule, deprecation string, err error) {
	s = backoff.Schedule{First: c.BackoffMin, Max: c.BackoffCap, Jitter: backoff.DefaultJitter}
	if c.Backoff != "" {
		list, err := parseBackoffList(c.Backoff)
		if err != nil {
			return s, "", fmt.Errorf("pipeline.backoff (deprecated) %q: %w", c.Backoff, err)
		}
		s.First, s.Max = list[0], min(list[len(list)-1], c.BackoffCap)
		deprecation = fmt.Sprintf("pipeline.backoff is deprecated and will be removed in the next release; %q is read as pipeline.backoff-min=%s pipeline.backoff-cap=%s (waits double from the first to the cap, with jitter); set those instead",
			c.Backoff, s.First, s.Max)
	}
	if s.First <= 0 || s.Max <= 0 || s.First > s.Max {
		return s, "", fmt.Errorf("pipeline.backoff-min %v, pipeline.backoff-cap %v: need 0 < min <= cap, e.g. 1s and 1m", s.First, s.Max)
	}
	return s, deprecation, nil
}

// parseBackoffList reads the deprecated per-attempt list.
func parseBackoffList(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, p := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, fmt.Errorf("%s: must be positive", p)
		}
		out = append(out, d)
	}
	return out, nil
}

// HistoryConfig controls the daily history sweep (R-C11) and the time of
// the daily maintenance run.
type HistoryConfig struct {
	// Retention is how long a flight stays live after its operation day,
	// in whole days (72h = 3 days).
	Retention time.Duration `yaml:"retention"`
	// RunAt is the time of day (HH:MM, airport time in operation-day.zone)
	// of the daily record cleanup and history sweep.
	RunAt string `yaml:"run_at"`
	// Keep is how long a flight stays in flight_history after its
	// operation day, in whole days (G-FLIGHT-HIST-RETENTION).
	Keep time.Duration `yaml:"keep"`
	// JobShare is the largest share of the time the daily job's deleting
	// steps may take; it rests in between (R-M5).
	JobShare float64 `yaml:"job_share"`
}

// registerMaintenanceFlags registers pipeline.record-retention,
// pipeline.self-check-interval, pipeline.self-check-grace,
// history.retention, history.keep, history.run-at and history.job-share.
func (c *Config) registerMaintenanceFlags(prefix string, fs *flag.FlagSet) {
	fs.DurationVar(&c.Pipeline.RecordRetention, prefix+"pipeline.record-retention", pipeline.DefaultRecordRetention,
		"terminal, backfilled processing records are deleted this long after they finished (720h = 30 days); also how long a business identity is remembered for duplicate detection")
	fs.DurationVar(&c.Pipeline.SelfCheckInterval, prefix+"pipeline.self-check-interval", pipeline.DefaultSelfCheckInterval,
		"how often the self-check finishes stranded messages: APPLIED without a pending projection, terminal without a backfill intent (R-H4); each repair is counted in msgx_processor_selfcheck_repaired_total and logged with alert stranded-message")
	fs.DurationVar(&c.Pipeline.SelfCheckGrace, prefix+"pipeline.self-check-grace", pipeline.DefaultSelfCheckGrace,
		"the self-check repairs only states older than this, so it never acts on a message a live transaction is still finishing")
	fs.DurationVar(&c.History.Retention, prefix+"history.retention", pipeline.DefaultHistoryRetention,
		"flights move to flight_history this many whole days after their operation day (72h = 3 days)")
	fs.DurationVar(&c.History.Keep, prefix+"history.keep", pipeline.DefaultHistoryKeep,
		"flight_history keeps a flight this many whole days after its operation day (9600h = 400 days), then the daily maintenance deletes it; at least 30 days more than history.retention")
	fs.StringVar(&c.History.RunAt, prefix+"history.run-at", "03:30",
		"time of day HH:MM in operation-day.zone of the daily record cleanup and history sweep")
	fs.Float64Var(&c.History.JobShare, prefix+"history.job-share", pipeline.DefaultJobShare,
		"largest share of the time the daily cleanup, sweep and purge may spend deleting: after each batch that took d they rest d×(1−share)/share (at most 10s), so that their writes leave the live pipeline's commits room; 1 runs the batches back to back")
}

// validateMaintenance reports the invalid maintenance values.
func (c *Config) validateMaintenance() []error {
	var errs []error
	if c.Pipeline.RecordRetention < 24*time.Hour {
		errs = append(errs, fmt.Errorf("pipeline.record-retention %v: must be at least 24h (it is also the duplicate-detection memory), e.g. 720h for 30 days", c.Pipeline.RecordRetention))
	}
	if r := c.History.Retention; r < 24*time.Hour || r%(24*time.Hour) != 0 {
		errs = append(errs, fmt.Errorf("history.retention %v: must be a positive number of whole days, e.g. 72h for 3 days", r))
	}
	if f := c.History.JobShare; !(f > 0 && f <= 1) {
		errs = append(errs, fmt.Errorf("history.job-share %v: must be above 0 and at most 1, e.g. 0.25 to delete a quarter of the time", f))
	}
	if k := c.History.Keep; k%(24*time.Hour) != 0 || k < c.History.Retention+30*24*time.Hour {
		errs = append(errs, fmt.Errorf("history.keep %v: must be whole days, at least 30 days (720h) more than history.retention, e.g. 9600h for 400 days", k))
	}
	if c.Pipeline.SelfCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("pipeline.self-check-interval %v: must be positive, e.g. 30s", c.Pipeline.SelfCheckInterval))
	}
	if c.Pipeline.SelfCheckGrace < time.Second {
		errs = append(errs, fmt.Errorf("pipeline.self-check-grace %v: must be at least 1s, e.g. 1m", c.Pipeline.SelfCheckGrace))
	}
	if _, err := parseRunAt(c.History.RunAt); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// parseRunAt reads HH:MM as an offset from midnight.
func parseRunAt(s string) (time.Duration, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, errors.New("history.run-at " + fmt.Sprintf("%q", s) + ": want HH:MM (24-hour clock, airport time), e.g. 03:30")
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, nil
}
