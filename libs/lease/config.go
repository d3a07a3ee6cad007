package lease

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"msgexchange/libs/config"
)

// Config is how a service reaches the lease API and how it uses its leases
// (YAML section "lease" of a service that runs single-active).
type Config struct {
	// ControlAddr is the control plane's gRPC address. Default
	// 127.0.0.1:9095.
	ControlAddr string `yaml:"control_addr"`
	// AuthToken is the control plane's bearer token (R-F3), given as a
	// value. TokenFile is preferred: it rotates without a restart.
	AuthToken config.Secret `yaml:"auth_token"`
	// TokenFile is a file holding the service's bearer token (the token of
	// a principal:service:token line of the control plane's token file),
	// re-read when it changes so that the token rotates without a restart
	// (R-H9). It takes precedence over AuthToken.
	TokenFile string `yaml:"token_file"`
	// TLS is how the connection to the control plane is secured: the CA
	// that signs the control plane's certificate and, for mutual TLS, the
	// service's client certificate. Default: plaintext.
	TLS config.TLS `yaml:"tls"`
	// TTL is the lease time to live. Default 10s.
	TTL time.Duration `yaml:"ttl"`
	// Retry is how often a standby tries to acquire. Default 2s.
	Retry time.Duration `yaml:"retry"`
}

// RegisterFlags registers <prefix>control-addr, <prefix>auth-token,
// <prefix>token-file, <prefix>tls.*, <prefix>ttl and <prefix>retry.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.ControlAddr, prefix+"control-addr", "127.0.0.1:9095", "gRPC address of the control plane that keeps the leases")
	fs.Func(prefix+"auth-token", "bearer token of the control plane; prefer the config file with ${VAR} and -config.expand-env over the command line", func(s string) error {
		c.AuthToken = config.Secret(s)
		return nil
	})
	fs.StringVar(&c.TokenFile, prefix+"token-file", "", "file holding this service's control-plane bearer token (role service), re-read when it changes; takes precedence over "+prefix+"auth-token")
	c.TLS.RegisterFlags(prefix+"tls.", "control plane", fs)
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
	if c.TokenFile != "" {
		if _, err := readTokenFile(c.TokenFile); err != nil {
			errs = append(errs, fmt.Errorf("%stoken-file: %w", prefix, err))
		}
	}
	if err := c.TLS.Validate(prefix + "tls."); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Dial connects to the control plane at ControlAddr with the configured
// credentials and transport (DialConfigOptions). fallbackToken is used when
// neither TokenFile nor AuthToken is set (an all-in-one process reusing
// its own control plane's token). extra are added to the connection's
// options (the process's gRPC client spans, R-N2).
func (c *Config) Dial(fallbackToken string, extra ...grpc.DialOption) (*GRPCClient, error) {
	opts, err := c.DialOptions(fallbackToken)
	if err != nil {
		return nil, err
	}
	opts = append(opts, extra...)
	return dial(c.ControlAddr, opts)
}

// DialOptions are the connection options of c: TLS as configured (or
// plaintext), and the bearer token of TokenFile, AuthToken or
// fallbackToken, in that order, on every call.
func (c *Config) DialOptions(fallbackToken string) ([]grpc.DialOption, error) {
	var transport credentials.TransportCredentials = insecure.NewCredentials()
	if c.TLS.On() {
		tcfg, err := ClientTLS(c.TLS)
		if err != nil {
			return nil, fmt.Errorf("loading the control plane's TLS: %w", err)
		}
		transport = credentials.NewTLS(tcfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(transport), reconnect}
	secure := c.TLS.On()
	switch {
	case c.TokenFile != "":
		opts = append(opts, grpc.WithPerRPCCredentials(NewFileToken(c.TokenFile, secure)))
	case c.AuthToken.Reveal() != "":
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: c.AuthToken.Reveal(), secure: secure}))
	case fallbackToken != "":
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: fallbackToken, secure: secure}))
	}
	return opts, nil
}

// Options returns the Elector options of c, logging to logger.
func (c *Config) Options(logger *slog.Logger) Options {
	return Options{TTL: c.TTL, Retry: c.Retry, Logger: logger}
}

// ValidateProduction refuses, for production mode (R-K1), dialling a
// control plane off the machine without TLS: the service's bearer token
// would cross the network in clear, and whoever answers could grant the
// leases. prefix names the keys, e.g. "lease.".
func (c *Config) ValidateProduction(prefix string) error {
	if c.ControlAddr != "" && !c.TLS.On() && !config.LoopbackAddr(c.ControlAddr) {
		return config.Refusal(prefix+"tls", fmt.Sprintf("%scontrol-addr %s is off this machine: dial it over TLS (%stls.ca-file, the CA of the control plane's certificate)", prefix, c.ControlAddr, prefix))
	}
	return nil
}
