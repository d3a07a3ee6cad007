// Package redisutil connects to Redis with go-redis.
package redisutil

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config is a Redis connection plus the key prefix every key of the
// projection starts with (so several sites or tests can share one Redis).
type Config struct {
	URL       string `yaml:"url"`
	KeyPrefix string `yaml:"key_prefix"`
}

// RegisterFlags registers <prefix>url and <prefix>key-prefix.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.URL, prefix+"url", "redis://127.0.0.1:6379/0", "Redis URL")
	fs.StringVar(&c.KeyPrefix, prefix+"key-prefix", "msgx:", "prefix of every Redis key the system writes")
}

// Validate reports an unparsable URL.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("redis.url: required")
	}
	if _, err := redis.ParseURL(c.URL); err != nil {
		return fmt.Errorf("redis.url: %w", err)
	}
	return nil
}

// New returns a client with short timeouts: the projection retries on its
// own, so a dead Redis must fail fast rather than hang.
func New(c Config) (*redis.Client, error) {
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing redis url: %w", err)
	}
	opt.DialTimeout = 2 * time.Second
	opt.ReadTimeout = 2 * time.Second
	opt.WriteTimeout = 2 * time.Second
	opt.MaxRetries = 1
	return redis.NewClient(opt), nil
}
