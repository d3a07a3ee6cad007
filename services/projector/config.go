package projector

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"msgexchange/services/projector/internal/board"
)

// Config is the projector's configuration (flags under projector.*). The
// Redis connection and key prefix and the Kafka settings come through Deps.
type Config struct {
	// Group is the Kafka consumer group of msgx.flight-state; default
	// msgx-projector. Every projector instance of a site uses the same group.
	Group string `yaml:"group"`
	// BackoffMax caps the exponential backoff (100ms doubling) between
	// retries of a batch whose Redis write or ack produce failed; default 5s.
	BackoffMax time.Duration `yaml:"backoff_max"`
	// MaxBatch is the most records polled, written to Redis in one pipelined
	// round trip and committed together; default 1000.
	MaxBatch int `yaml:"max_batch"`
	// RedisTimeout bounds one Redis call (a batch write or an HTTP read);
	// default 5s.
	RedisTimeout time.Duration `yaml:"redis_timeout"`
	// KafkaTimeout bounds one ack produce, one offset commit and one lag
	// query; default 30s.
	KafkaTimeout time.Duration `yaml:"kafka_timeout"`
	// SessionTimeout is the consumer-group session timeout (default 10s):
	// the longest a killed projector's partitions wait before a live
	// member takes them over.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// InstanceID makes the projector a static consumer-group member
	// ("" = the host name; "none" = a dynamic member): restarted under the same ID it
	// takes its partitions back at once.
	InstanceID string `yaml:"instance_id"`
	// RebuildWait is the longest a projection rebuild manifest (R-E4) waits
	// for Redis to hold every flight version it lists before the stale
	// flights are removed anyway and the rebuild is reported incomplete;
	// default 10m.
	RebuildWait time.Duration `yaml:"rebuild_wait"`
	// RebuildMaxAge skips rebuild manifests created longer ago (a new
	// consumer group reading retained manifests must not redo old
	// rebuilds); default 1h.
	RebuildMaxAge time.Duration `yaml:"rebuild_max_age"`
	// WatchdogInterval is how often the projector checks that Redis still
	// holds the whole projection, and so the longest it takes to start
	// rebuilding a lost one from PostgreSQL (R-H5); default 1s. Reads
	// refuse an incomplete projection at once, whatever the interval.
	WatchdogInterval time.Duration `yaml:"watchdog_interval"`
	// PostgresTimeout bounds one PostgreSQL query of a rebuild from
	// PostgreSQL or of a consistency check; default 30s.
	PostgresTimeout time.Duration `yaml:"postgres_timeout"`
	// Consistency tunes the consistency sentinel (R-H5).
	Consistency ConsistencyConfig `yaml:"consistency"`
	// Zone is the airport's time zone (IANA name), in which the SIS flight
	// times (SODT) are airport wall-clock times: the from/to filters of
	// GET /all/flights and the board's window read them in it; default
	// Asia/Shanghai, as processor.operation-day.zone.
	Zone string `yaml:"zone"`
	// Board tunes the web flight board.
	Board BoardConfig `yaml:"board"`
	// StallLimit is how long a Kafka loop may stay stalled — fenced by a
	// member with the same static ID that it could not get around, its
	// group session or fetches refused by the brokers — before the process
	// ends so that its supervisor restarts it (R-L8); the process reports
	// not ready from the first refusal. Default 1m.
	StallLimit time.Duration `yaml:"stall_limit"`
}

// BoardConfig is the web flight board's default window: the flights
// scheduled from Past before now to Ahead after now (airport time). A
// board's URL may ask for another window (?past=1h&ahead=6h) of at most
// MaxBoardWindow each way.
type BoardConfig struct {
	// Past is how far back the window reaches; default 2h, so flights
	// that just left or landed stay on the board.
	Past time.Duration `yaml:"past"`
	// Ahead is how far forward the window reaches; default 12h.
	Ahead time.Duration `yaml:"ahead"`
	// MaxStreams caps the open board streams of the process and
	// MaxStreamsPerClient those of one client address; a stream beyond
	// either is refused with 503 (R-K5). Defaults 1000 and 20.
	MaxStreams          int `yaml:"max_streams"`
	MaxStreamsPerClient int `yaml:"max_streams_per_client"`
}

// MaxBoardWindow bounds each side of a board's window: a board is for the
// operation of the coming hours, and a week each way is already more rows
// than a screen can show; the whole projection is GET /all/flights.
const MaxBoardWindow = board.MaxWindow

// ConsistencyConfig tunes the consistency sentinel, which compares a
// random sample of PostgreSQL's flights with Redis and repairs what
// differs (R-H5; seed settings consistency-check.on-startup and
// daily-sample-ratio).
type ConsistencyConfig struct {
	// OnStartup runs a check once the projection is complete after the
	// start, comparing a whole day's share of flights; default true.
	OnStartup bool `yaml:"on_startup"`
	// Interval is the period of the checks after that; default 1h, 0 runs
	// none.
	Interval time.Duration `yaml:"interval"`
	// DailySampleRatio is the share of all flights compared per day,
	// spread over the day's periodic checks; default 0.01.
	DailySampleRatio float64 `yaml:"daily_sample_ratio"`
	// MinSample is the least number of flights one check compares (all,
	// when there are fewer); default 100.
	MinSample int `yaml:"min_sample"`
	// Settle keeps flights changed in PostgreSQL more recently out of the
	// sample, because their record may still be on its way to Redis;
	// default 1m.
	Settle time.Duration `yaml:"settle"`
}

// enabled reports whether any check runs.
func (c ConsistencyConfig) enabled() bool { return c.OnStartup || c.Interval > 0 }

// RegisterFlags registers the projector's flags as <prefix>kebab-case with
// their defaults.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.Group, prefix+"group", "msgx-projector", "Kafka consumer group consuming msgx.flight-state")
	fs.DurationVar(&c.BackoffMax, prefix+"backoff-max", 5*time.Second, "longest wait between retries of a batch whose Redis write or acks failed (backoff starts at 100ms and doubles)")
	fs.IntVar(&c.MaxBatch, prefix+"max-batch", 1000, "most flight-state records per poll, Redis round trip and offset commit")
	fs.DurationVar(&c.RedisTimeout, prefix+"redis-timeout", 5*time.Second, "timeout of one Redis call (batch write or HTTP read)")
	fs.DurationVar(&c.KafkaTimeout, prefix+"kafka-timeout", 30*time.Second, "timeout of one ack produce, offset commit or lag query")
	fs.StringVar(&c.InstanceID, prefix+"instance-id", "", `static consumer-group member ID; empty means the host name (unique per pod), "none" a dynamic member: a restarted projector takes its partitions back at once`)
	fs.DurationVar(&c.RebuildWait, prefix+"rebuild-wait", 10*time.Minute, "longest a projection rebuild waits for Redis to hold every flight version of its manifest before it removes the stale flights anyway and reports the rebuild incomplete")
	fs.DurationVar(&c.RebuildMaxAge, prefix+"rebuild-max-age", time.Hour, "projection rebuild manifests created longer ago are skipped (the consumer group <group>-control reading old manifests)")
	fs.DurationVar(&c.WatchdogInterval, prefix+"watchdog-interval", time.Second, "how often the projector checks that Redis still holds the whole projection; a lost one (Redis restart without persistence, FLUSHALL, failover to an empty replica) is rebuilt from PostgreSQL at the next check, and reads answer 503 meanwhile")
	fs.DurationVar(&c.PostgresTimeout, prefix+"postgres-timeout", 30*time.Second, "timeout of one PostgreSQL query of a projection rebuild from PostgreSQL or of a consistency check (the projector only reads PostgreSQL)")
	fs.BoolVar(&c.Consistency.OnStartup, prefix+"consistency.on-startup", true, "run a consistency check of Redis against PostgreSQL once the projection is complete after the start (a whole day's share of flights)")
	fs.DurationVar(&c.Consistency.Interval, prefix+"consistency.interval", time.Hour, "period of the consistency checks after the start; 0 runs none")
	fs.Float64Var(&c.Consistency.DailySampleRatio, prefix+"consistency.daily-sample-ratio", 0.01, "share of all flights the consistency checks compare per day (each periodic check compares ratio × flights × interval / 24h)")
	fs.IntVar(&c.Consistency.MinSample, prefix+"consistency.min-sample", 100, "least number of flights one consistency check compares (all of them when there are fewer)")
	fs.DurationVar(&c.Consistency.Settle, prefix+"consistency.settle", time.Minute, "flights changed in PostgreSQL more recently are not sampled: their record may still be on its way to Redis")
	fs.StringVar(&c.Zone, prefix+"zone", "Asia/Shanghai", "airport time zone (IANA name) in which SIS flight times (SODT) are read: the from/to filters of GET /all/flights and the flight board's window")
	fs.DurationVar(&c.Board.Past, prefix+"board.past", 2*time.Hour, "the flight board shows flights scheduled from this long before now (airport time); a board URL may ask for another with ?past=")
	fs.DurationVar(&c.Board.Ahead, prefix+"board.ahead", 12*time.Hour, "the flight board shows flights scheduled up to this long after now (airport time); a board URL may ask for another with ?ahead=")
	fs.IntVar(&c.Board.MaxStreams, prefix+"board.max-streams", 1000, "most open flight board streams of the process; more are refused with 503 (windows are rounded up to 0, 30m, 1h, 2h, 3h, 6h, 12h, 24h, 48h, 72h or 168h, and boards on one window share its list)")
	fs.IntVar(&c.Board.MaxStreamsPerClient, prefix+"board.max-streams-per-client", 20, "most open flight board streams of one client address (a reverse proxy in front counts as one client); more are refused with 503")
	fs.DurationVar(&c.StallLimit, prefix+"stall-limit", time.Minute, "longest a Kafka loop may stay stalled (fenced, its group session or fetches refused by the brokers) before the process exits for its supervisor to restart it; it reports not ready from the first refusal, and an unreachable broker is not a stall")
	fs.DurationVar(&c.SessionTimeout, prefix+"session-timeout", 10*time.Second, "consumer-group session timeout: how long a killed projector's partitions wait before a live member takes them (the broker's group.min/max.session.timeout.ms bound it)")
}

// Validate reports every invalid setting at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("projector.group: must not be empty; set the consumer group (default msgx-projector)"))
	}
	if c.BackoffMax <= 0 {
		errs = append(errs, fmt.Errorf("projector.backoff-max: %s must be positive (default 5s)", c.BackoffMax))
	}
	if c.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("projector.max-batch: %d must be at least 1 (default 1000)", c.MaxBatch))
	}
	if c.RedisTimeout <= 0 {
		errs = append(errs, fmt.Errorf("projector.redis-timeout: %s must be positive (default 5s)", c.RedisTimeout))
	}
	if c.SessionTimeout < time.Second {
		errs = append(errs, fmt.Errorf("projector.session-timeout: %s must be at least 1s (default 10s)", c.SessionTimeout))
	}
	if c.StallLimit < time.Second {
		errs = append(errs, fmt.Errorf("projector.stall-limit: %s must be at least 1s (default 1m)", c.StallLimit))
	}
	if c.RebuildWait <= 0 {
		errs = append(errs, fmt.Errorf("projector.rebuild-wait: %s must be positive (default 10m)", c.RebuildWait))
	}
	if c.RebuildMaxAge < c.RebuildWait {
		errs = append(errs, fmt.Errorf("projector.rebuild-max-age: %s must be at least projector.rebuild-wait %s (default 1h)", c.RebuildMaxAge, c.RebuildWait))
	}
	if c.KafkaTimeout <= 0 {
		errs = append(errs, fmt.Errorf("projector.kafka-timeout: %s must be positive (default 30s)", c.KafkaTimeout))
	}
	if c.WatchdogInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("projector.watchdog-interval: %s must be at least 10ms (default 1s)", c.WatchdogInterval))
	}
	if c.PostgresTimeout <= 0 {
		errs = append(errs, fmt.Errorf("projector.postgres-timeout: %s must be positive (default 30s)", c.PostgresTimeout))
	}
	if c.Zone == "" {
		errs = append(errs, errors.New("projector.zone: must not be empty; set the airport time zone (default Asia/Shanghai)"))
	} else if _, err := time.LoadLocation(c.Zone); err != nil {
		errs = append(errs, fmt.Errorf("projector.zone: %q is not a known time zone (an IANA name such as Asia/Shanghai): %w", c.Zone, err))
	}
	for _, w := range []struct {
		name string
		d    time.Duration
		def  string
	}{{"projector.board.past", c.Board.Past, "2h"}, {"projector.board.ahead", c.Board.Ahead, "12h"}} {
		if w.d < 0 || w.d > MaxBoardWindow {
			errs = append(errs, fmt.Errorf("%s: %s must be between 0 and %s (default %s)", w.name, w.d, MaxBoardWindow, w.def))
		}
	}
	if c.Board.MaxStreams < 1 || c.Board.MaxStreamsPerClient < 1 || c.Board.MaxStreamsPerClient > c.Board.MaxStreams {
		errs = append(errs, fmt.Errorf("projector.board.max-streams %d and projector.board.max-streams-per-client %d: both at least 1, the second at most the first (defaults 1000 and 20)",
			c.Board.MaxStreams, c.Board.MaxStreamsPerClient))
	}
	if c.Board.Past == 0 && c.Board.Ahead == 0 {
		errs = append(errs, errors.New("projector.board.past and projector.board.ahead: both 0 is a window of no time; the default is 2h and 12h"))
	}
	cc := c.Consistency
	if cc.Interval < 0 {
		errs = append(errs, fmt.Errorf("projector.consistency.interval: %s must not be negative (0 runs no periodic check; default 1h)", cc.Interval))
	}
	if cc.DailySampleRatio < 0 || cc.DailySampleRatio > 1 || cc.DailySampleRatio != cc.DailySampleRatio {
		errs = append(errs, fmt.Errorf("projector.consistency.daily-sample-ratio: %v must be between 0 and 1 (default 0.01)", cc.DailySampleRatio))
	}
	if cc.MinSample < 0 {
		errs = append(errs, fmt.Errorf("projector.consistency.min-sample: %d must not be negative (default 100)", cc.MinSample))
	}
	if cc.enabled() && cc.DailySampleRatio == 0 && cc.MinSample == 0 {
		errs = append(errs, errors.New("projector.consistency: daily-sample-ratio and min-sample are both 0, so every check compares nothing; raise one, or turn the checks off with on-startup=false and interval=0"))
	}
	if cc.Settle < 0 {
		errs = append(errs, fmt.Errorf("projector.consistency.settle: %s must not be negative (default 1m)", cc.Settle))
	}
	return errors.Join(errs...)
}

// instanceName names this projector in the projection's completeness
// marker and rebuild lock: the member ID, else the host name.
func (c *Config) instanceName() string {
	if id := c.memberID(); id != "" {
		return id
	}
	host, _ := os.Hostname()
	return host
}

// memberID resolves InstanceID: the host name when empty, none for "none".
func (c *Config) memberID() string {
	switch c.InstanceID {
	case "none":
		return ""
	case "":
		host, _ := os.Hostname()
		return host
	}
	return c.InstanceID
}
