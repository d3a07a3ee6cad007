package projector

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
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
}

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
	if c.RebuildWait <= 0 {
		errs = append(errs, fmt.Errorf("projector.rebuild-wait: %s must be positive (default 10m)", c.RebuildWait))
	}
	if c.RebuildMaxAge < c.RebuildWait {
		errs = append(errs, fmt.Errorf("projector.rebuild-max-age: %s must be at least projector.rebuild-wait %s (default 1h)", c.RebuildMaxAge, c.RebuildWait))
	}
	if c.KafkaTimeout <= 0 {
		errs = append(errs, fmt.Errorf("projector.kafka-timeout: %s must be positive (default 30s)", c.KafkaTimeout))
	}
	return errors.Join(errs...)
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
