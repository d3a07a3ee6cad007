package processor

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"msgexchange/services/processor/internal/pipeline"
)

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
}

// registerMaintenanceFlags registers pipeline.record-retention,
// pipeline.self-check-interval, pipeline.self-check-grace,
// history.retention and history.run-at.
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
