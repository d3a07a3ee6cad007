// Package redisutil connects to Redis with go-redis.
package redisutil

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"msgexchange/libs/clock"
	"msgexchange/libs/config"
	"msgexchange/libs/logging"
)

// Config is a Redis connection plus the key prefix every key of the
// projection starts with (so several sites or tests can share one Redis).
type Config struct {
	URL       string `yaml:"url"`
	KeyPrefix string `yaml:"key_prefix"`
	// TLS holds the CA, and the client certificate when the server
	// requires one, of a rediss:// URL (R-H11); without it rediss://
	// verifies the server against the system's roots.
	TLS config.TLS `yaml:"tls"`
}

// RegisterFlags registers <prefix>url, <prefix>key-prefix and <prefix>tls.*.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.URL, prefix+"url", "redis://127.0.0.1:6379/0", "Redis URL (rediss:// for TLS)")
	fs.StringVar(&c.KeyPrefix, prefix+"key-prefix", "msgx:", "prefix of every Redis key the system writes")
	c.TLS.RegisterFlags(prefix+"tls.", "Redis server", fs)
}

// Validate reports an unparsable URL, TLS files that cannot be loaded, TLS
// files with a plaintext redis:// URL (the files would be silently
// ignored), and a URL that turns verification off.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("redis.url: required")
	}
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return fmt.Errorf("redis.url: %w", err)
	}
	if opt.TLSConfig != nil && opt.TLSConfig.InsecureSkipVerify {
		return errors.New("redis.url: skip_verify turns off the verification of the server's certificate; give its CA in redis.tls.ca-file instead")
	}
	if c.TLS.On() {
		if opt.TLSConfig == nil {
			return errors.New("redis.tls.*: set, but redis.url is redis://; use rediss:// for TLS")
		}
		return c.TLS.Validate("redis.tls.")
	}
	return nil
}

// New returns a client with short timeouts: the projection retries on its
// own, so a dead Redis must fail fast rather than hang. The library's lines
// go to log (slog.Default when nil), so that they take the process's format
// and its level, also when the level changes at run time (R-N2).
func New(c Config, log *slog.Logger) (*redis.Client, error) {
	if log == nil {
		log = slog.Default()
	}
	// go-redis logs a line per failed dial or pool error; during an outage
	// that is a line per try. Through slog, a few lines a second per cause,
	// with counts of the rest (logging.RateLimited). The logger is the
	// library's one, global: every client shares it.
	redis.SetLogger(redisLog{log: slog.New(logging.RateLimited(log.Handler(), 3, time.Second, clock.Real{})).With("component", "redis-client")})
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing redis url: %w", err)
	}
	opt.DialTimeout = 2 * time.Second
	opt.ReadTimeout = 2 * time.Second
	opt.WriteTimeout = 2 * time.Second
	opt.MaxRetries = 1
	// No CLIENT command at connect: neither the library's name (CLIENT
	// SETINFO) nor maintenance notifications (CLIENT MAINT_NOTIFICATIONS,
	// a managed-cloud feature) serve this client, and the projector's
	// least-privilege Redis user is granted no CLIENT command
	// (projector.RedisCommands, R-K7): each try would be refused and
	// logged by the server.
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if opt.TLSConfig != nil && c.TLS.On() {
		host := opt.TLSConfig.ServerName // the URL's host, as rediss:// alone verifies
		load := func() (*tls.Config, error) {
			tc, err := c.TLS.ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("loading redis.tls.%w", err)
			}
			if tc.ServerName == "" {
				tc.ServerName = host
			}
			return tc, nil
		}
		if opt.TLSConfig, err = load(); err != nil {
			return nil, err
		}
		// The files are read again for every new connection, so that
		// certificates rotated in a mounted Secret are used without a
		// restart.
		nd := &net.Dialer{Timeout: opt.DialTimeout}
		opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			tc, err := load()
			if err != nil {
				return nil, err
			}
			return (&tls.Dialer{NetDialer: nd, Config: tc}).DialContext(ctx, network, addr)
		}
	}
	return redis.NewClient(opt), nil
}

// redisLog is go-redis's logger writing to slog at WARN.
type redisLog struct{ log *slog.Logger }

// Printf logs the library's line.
func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}

// ValidateProduction refuses, for production mode (R-K1), a plaintext
// redis:// URL to a host off the machine: the projection and the password
// would cross the network in clear. Use rediss:// (with redis.tls.ca-file
// for a private CA). A loopback host or a Unix socket may stay plaintext.
func (c *Config) ValidateProduction() error {
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil // Validate reports it
	}
	if opt.TLSConfig == nil && opt.Network != "unix" && !config.LoopbackAddr(opt.Addr) {
		return config.Refusal("redis.url", "redis:// to a host off this machine is plaintext; use rediss:// (with redis.tls.ca-file for a private CA)")
	}
	return nil
}

// MarshalYAML prints the configuration with the password of the URL
// masked (-print-config, R-K8).
func (c Config) MarshalYAML() (any, error) {
	type plain Config // without this method
	p := plain(c)
	p.URL = config.MaskURL(p.URL)
	return p, nil
}
