package main

import (
	"errors"
	"fmt"
	"strings"

	"msgexchange/libs/kafka"
)

// Modes of the process (-mode). Production is the default, so that a
// deployment that forgets the setting gets the strict checks; only the
// development configuration (deploy/local.yaml, the test stacks) says
// development.
const (
	ModeProduction  = "production"
	ModeDevelopment = "development"
)

// developmentToken is the control-plane token of the development
// configuration: public, so never a credential.
const developmentToken = "dev-token"

// minTokenBytes is the shortest control-plane token production accepts:
// 32 bytes of a random hex or base64 string are far beyond guessing.
const minTokenBytes = 32

// validateMode refuses, outside development mode, what is only safe on a
// developer's machine (R-H9, R-H8): an unauthenticated control plane, the
// development token or a short token given as control.auth-token or as the
// lease client's lease.auth-token, and SASL PLAIN without TLS (the password
// would cross the network as it is). Tokens are never printed.
func (c *Config) validateMode(need map[string]bool, targets []string) error {
	switch c.Mode {
	case ModeDevelopment:
		return nil
	case ModeProduction:
	default:
		return fmt.Errorf("mode %q: want %s or %s", c.Mode, ModeProduction, ModeDevelopment)
	}
	var errs []error
	control := false
	for _, t := range targets {
		control = control || t == "control"
	}
	if control {
		if c.Control.InsecureNoAuth {
			errs = append(errs, errors.New("control.insecure-no-auth: refused outside development mode (mode: development): production never runs an unauthenticated control plane"))
		}
		errs = append(errs, checkToken("control.auth-token", c.Control.AuthToken.Reveal()))
	}
	if need["lease"] {
		// The lease client falls back to the control plane's token (the
		// all-in-one process calls its own control plane). A client with
		// no token at all is refused by the control plane itself.
		switch {
		case c.Lease.AuthToken != "":
			errs = append(errs, checkToken("lease.auth-token", c.Lease.AuthToken.Reveal()))
		case c.Control.AuthToken != "" && !control:
			errs = append(errs, checkToken("control.auth-token (the lease client's token)", c.Control.AuthToken.Reveal()))
		}
	}
	if need["kafka"] && strings.EqualFold(c.Kafka.SASL.Mechanism, kafka.MechanismPlain) && !c.Kafka.TLS.On() {
		errs = append(errs, errors.New("kafka.sasl.mechanism PLAIN: refused without kafka.tls outside development mode: PLAIN sends the password as it is; enable kafka.tls or use SCRAM-SHA-512"))
	}
	return errors.Join(errs...)
}

// checkToken refuses the development token and tokens shorter than
// minTokenBytes. An empty token is control.Validate's to report.
func checkToken(key, tok string) error {
	switch {
	case tok == "":
		return nil
	case tok == developmentToken:
		return fmt.Errorf("%s: the development token is refused outside development mode; set a random token of at least %d bytes (e.g. openssl rand -hex 32) from a mounted secret", key, minTokenBytes)
	case len(tok) < minTokenBytes:
		return fmt.Errorf("%s: %d bytes is too short outside development mode; want at least %d bytes of a random token (e.g. openssl rand -hex 32)", key, len(tok), minTokenBytes)
	}
	return nil
}
