package adminhttp

import (
	"flag"
	"fmt"
	"net"

	"msgexchange/libs/config"
)

// Config of the admin port.
type Config struct {
	// Addr is the admin listener's host:port; empty (the default) serves
	// no admin port at all.
	Addr string `yaml:"addr"`
}

// RegisterFlags registers <prefix>addr (default empty: off).
func (c *Config) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, prefix+"addr", "", "admin HTTP address serving pprof (/debug/pprof/) and the runtime log level (/debug/loglevel), e.g. 127.0.0.1:6060; empty serves none. Production mode accepts loopback only (pprof exposes the process's memory): reach it with kubectl port-forward (docs/runbook.md, Profiling and the log level)")
}

// Enabled reports whether the admin port is served.
func (c *Config) Enabled() bool { return c.Addr != "" }

// Validate reports an address that is not host:port.
func (c *Config) Validate(prefix string) error {
	if !c.Enabled() {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("%saddr %q: want host:port, e.g. 127.0.0.1:6060: %w", prefix, c.Addr, err)
	}
	return nil
}

// ValidateProduction refuses an admin port beyond loopback (R-K1): pprof
// serves the process's memory (a heap profile holds the credentials it
// read and the messages it handles) and the log level changes what it
// writes, to whoever reaches the port, without a credential.
func (c *Config) ValidateProduction(prefix string) error {
	if !c.Enabled() || config.LoopbackAddr(c.Addr) {
		return nil
	}
	return config.Refusal(prefix+"addr", fmt.Sprintf("%q is reachable from the network, and pprof serves the process's memory (credentials included) to whoever connects; listen on loopback, e.g. 127.0.0.1:6060, and reach it with kubectl port-forward", c.Addr))
}
