package lease

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"msgexchange/libs/config"
)

// Config is how a service reaches the lease API and how it uses its leases
// (YAML section "lease" of a service that runs single-active).
type Config struct {
	// ControlAddr is the control plane's gRPC address. Default
	// 127.0.0.1:9095.
	ControlAddr string `yaml:"control_addr"`
	// AuthToken is the control plane's bearer token (R-F3).
	AuthToken config.Secret `yaml:"auth_token"`
	// TTL is the lease time to live. Default 10s.
	TTL time.Duration `yaml:"ttl"`
	// Retry is how often a standby tries to acquire. Default 2s.
	Retry time.Duration `yaml:"retry"`
}

// RegisterFlags registers <prefix>control-addr, <prefix>auth-token,
// <prefix>ttl and <prefix>retry.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.ControlAddr, prefix+"control-addr", "127.0.0.1:9095", "gRPC address of the control plane that keeps the leases")
	fs.Func(prefix+"auth-token", "bearer token of the control plane; prefer the config file with ${VAR} and -config.expand-env over the command line", func(s string) error {
		c.AuthToken = config.Secret(s)
		return nil
	})
	fs.DurationVar(&c.TTL, prefix+"ttl", DefaultTTL, "lease time to live: a standby takes over at most ttl + retry after the active instance died")
	fs.DurationVar(&c.Retry, prefix+"retry", DefaultRetry, "how often a standby tries to acquire the lease")
}

// Validate reports every problem at once. prefix names the keys in the
// messages, e.g. "processor.lease.".
func (c *Config) Validate(prefix string) error {
	var errs []error
	if c.ControlAddr == "" {
		errs = append(errs, fmt.Errorf("%scontrol-addr: required, e.g. 127.0.0.1:9095; production never runs without a lease (R-F6)", prefix))
	} else if _, _, err := net.SplitHostPort(c.ControlAddr); err != nil {
		errs = append(errs, fmt.Errorf("%scontrol-addr %q: want host:port, e.g. 127.0.0.1:9095: %w", prefix, c.ControlAddr, err))
	}
	if c.TTL < time.Second {
		errs = append(errs, fmt.Errorf("%sttl %v: must be at least 1s, e.g. 10s", prefix, c.TTL))
	}
	if c.Retry <= 0 {
		errs = append(errs, fmt.Errorf("%sretry %v: must be positive, e.g. 2s", prefix, c.Retry))
	}
	return errors.Join(errs...)
}

// Options returns the Elector options of c, logging to logger.
func (c *Config) Options(logger *slog.Logger) Options {
	return Options{TTL: c.TTL, Retry: c.Retry, Logger: logger}
}
