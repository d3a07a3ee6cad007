package control

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"
	"unicode"

	"msgexchange/libs/config"
	"msgexchange/services/control/internal/interceptor"
)

// Config is the control plane's configuration (YAML section "control").
type Config struct {
	// GRPCAddr is the gRPC listen address. Default 127.0.0.1:9095.
	GRPCAddr string `yaml:"grpc_addr"`
	// AuthToken is a single bearer token with every role (service, read
	// and operate): the development credential (R-F3). Production uses
	// TokenFile, whose credentials name their principal and role (R-H9).
	AuthToken config.Secret `yaml:"auth_token"`
	// TokenFile is the file of the control plane's credentials, one
	// "principal:role:token" a line (role service, read or operate; a
	// service bound to its lease names as "service=NAMES"; see
	// docs/security.md), re-read every TokenReloadInterval so that tokens
	// rotate without a restart. Default none.
	TokenFile string `yaml:"token_file"`
	// TokenReloadInterval is how often TokenFile is re-read. Default 5s.
	TokenReloadInterval time.Duration `yaml:"token_reload_interval"`
	// InsecureNoAuth allows neither AuthToken nor TokenFile, i.e. no
	// authentication at all. Only development configurations set it.
	// Default false.
	InsecureNoAuth bool `yaml:"insecure_no_auth"`
	// TLS is the server's certificate and, for mutual TLS, the CA of the
	// client certificates. Default: plaintext.
	TLS ServerTLS `yaml:"tls"`
	// QueryTimeout bounds each PostgreSQL round trip of a call. Default 10s.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// HealthCheckInterval is how often PostgreSQL is pinged to keep the
	// gRPC health status current. Default 5s.
	HealthCheckInterval time.Duration `yaml:"health_check_interval"`
	// ShutdownTimeout is how long a stop waits for calls in flight before
	// cutting them off. Default 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Zone is the airport time zone in which outbound requests carry their
	// META/DTTM (R-D5). Default Asia/Shanghai.
	Zone string `yaml:"zone"`
}

// RegisterFlags registers the flags <prefix>grpc-addr, <prefix>auth-token,
// <prefix>token-file, <prefix>token-reload-interval,
// <prefix>insecure-no-auth, <prefix>tls.*, <prefix>query-timeout,
// <prefix>health-check-interval, <prefix>shutdown-timeout and <prefix>zone.
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.GRPCAddr, prefix+"grpc-addr", "127.0.0.1:9095", "gRPC listen address of the control plane")
	fs.Func(prefix+"auth-token", "single bearer token with every role (service, read, operate), for development; production uses "+prefix+"token-file. Prefer the config file with ${VAR} and -config.expand-env over the command line", func(s string) error {
		c.AuthToken = config.Secret(s)
		return nil
	})
	fs.StringVar(&c.TokenFile, prefix+"token-file", "", "file of the control plane's credentials, one principal:role:token a line (roles service, read, operate; service=LEASE,PREFIX/* binds a service to its lease names; several tokens may be valid at once); re-read while running")
	fs.DurationVar(&c.TokenReloadInterval, prefix+"token-reload-interval", 5*time.Second, "how often "+prefix+"token-file is re-read, so that tokens rotate without a restart")
	fs.BoolVar(&c.InsecureNoAuth, prefix+"insecure-no-auth", false, "allow neither "+prefix+"auth-token nor "+prefix+"token-file, i.e. no authentication (development only)")
	c.TLS.RegisterFlags(prefix+"tls.", fs)
	fs.DurationVar(&c.QueryTimeout, prefix+"query-timeout", 10*time.Second, "timeout of each PostgreSQL query of a control-plane call")
	fs.DurationVar(&c.HealthCheckInterval, prefix+"health-check-interval", 5*time.Second, "how often PostgreSQL is pinged to keep the gRPC health status current")
	fs.DurationVar(&c.ShutdownTimeout, prefix+"shutdown-timeout", 10*time.Second, "how long a stop waits for calls in flight before cutting them off")
	fs.StringVar(&c.Zone, prefix+"zone", "Asia/Shanghai", "airport time zone of the DTTM of outbound RQFD/RQRD requests")
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	if c.GRPCAddr == "" {
		errs = append(errs, errors.New("control.grpc-addr: required, e.g. 127.0.0.1:9095 or :9095"))
	} else if _, _, err := net.SplitHostPort(c.GRPCAddr); err != nil {
		errs = append(errs, fmt.Errorf("control.grpc-addr %q: want host:port, e.g. 127.0.0.1:9095: %w", c.GRPCAddr, err))
	}
	tok := c.AuthToken.Reveal()
	switch {
	case tok == "" && c.TokenFile == "" && !c.InsecureNoAuth:
		errs = append(errs, ErrAuthTokenRequired)
	case strings.IndexFunc(tok, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		errs = append(errs, errors.New("control.auth-token: must not contain spaces or control characters (it travels as \"Bearer <token>\"); check for a trailing newline in the secret"))
	}
	if c.TokenFile != "" {
		if _, err := interceptor.NewCredentials(c.TokenFile, ""); err != nil {
			errs = append(errs, fmt.Errorf("control.token-file: %w", err))
		}
	}
	if err := c.TLS.Validate("control.tls."); err != nil {
		errs = append(errs, err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"control.token-reload-interval", c.TokenReloadInterval},
		{"control.query-timeout", c.QueryTimeout},
		{"control.health-check-interval", c.HealthCheckInterval},
		{"control.shutdown-timeout", c.ShutdownTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be positive, e.g. 5s", d.name, d.v))
		}
	}
	if _, err := time.LoadLocation(c.Zone); err != nil || c.Zone == "" {
		errs = append(errs, fmt.Errorf("control.zone %q: want an IANA time zone such as Asia/Shanghai", c.Zone))
	}
	return errors.Join(errs...)
}

// Authenticated reports whether calls must carry a credential.
func (c *Config) Authenticated() bool { return c.AuthToken.Reveal() != "" || c.TokenFile != "" }

// ValidateProduction refuses, for production mode (R-K1), a control plane
// that listens beyond loopback without TLS: its callers' bearer tokens,
// operator tokens included, would cross the network in clear; and a token
// file with a service line that names no lease (R-K7): that credential
// could take any lease, so a stolen dispatcher token could stand the
// processor down.
func (c *Config) ValidateProduction() error {
	var errs []error
	if !c.TLS.On() && !config.LoopbackAddr(c.GRPCAddr) {
		errs = append(errs, config.Refusal("control.tls", fmt.Sprintf("control.grpc-addr %s listens beyond loopback: serve TLS (control.tls.cert-file and control.tls.key-file)", c.GRPCAddr)))
	}
	if c.TokenFile != "" {
		// A file that does not parse is reported by Validate.
		if creds, err := interceptor.NewCredentials(c.TokenFile, ""); err == nil {
			if unbound := creds.UnboundServices(); len(unbound) > 0 {
				errs = append(errs, config.Refusal("control.token-file", fmt.Sprintf(
					"the service lines of %s name no lease, so each could take any lease; bind each to its own, principal:service=NAMES:token (e.g. processor:service=processor, dispatcher:service=dispatcher/*)",
					strings.Join(unbound, ", "))))
			}
		}
	}
	return errors.Join(errs...)
}
