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

// validateMode refuses, outside development mode, what is only safe on a
// developer's machine (R-H9, R-H8):
//
//   - an unauthenticated control plane (control.insecure-no-auth);
//   - control.auth-token, the single token with every role: whoever holds
//     it is every service and every operator at once, so production gives
//     services and operators separate credentials (R-H9) and the control
//     plane needs control.token-file, one principal:role:token a line;
//   - a lease-holding service without lease.token-file, its own service
//     credential (re-read when it rotates), or with lease.auth-token, a
//     token given as a value;
//   - SASL PLAIN without TLS (the password would cross the network as it
//     is).
//
// The token files themselves refuse the development token and tokens
// shorter than 32 bytes in every mode, when they are parsed (the control
// plane's by control.Validate, the lease client's by lease.Validate).
// Tokens are never printed.
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
	if c.Control.AuthToken != "" {
		errs = append(errs, errors.New("control.auth-token: refused outside development mode (mode: development): it is one token with every role, so services and operators would share a credential; give each its own line in control.token-file and each service its token in lease.token-file (docs/security.md)"))
	}
	if control {
		if c.Control.InsecureNoAuth {
			errs = append(errs, errors.New("control.insecure-no-auth: refused outside development mode (mode: development): production never runs an unauthenticated control plane"))
		}
		if c.Control.TokenFile == "" {
			errs = append(errs, errors.New("control.token-file: required outside development mode: the control plane's credentials, one principal:role:token a line (role service for each service, read or operate for each operator; docs/security.md)"))
		}
	}
	if need["lease"] {
		if c.Lease.TokenFile == "" {
			errs = append(errs, errors.New("lease.token-file: required outside development mode: the file holding this service's own token, the token of a principal:service:token line of the control plane's control.token-file"))
		}
		if c.Lease.AuthToken != "" {
			errs = append(errs, errors.New("lease.auth-token: refused outside development mode: put this service's token in lease.token-file, which is re-read when the token rotates"))
		}
	}
	if need["kafka"] && strings.EqualFold(c.Kafka.SASL.Mechanism, kafka.MechanismPlain) && !c.Kafka.TLS.On() {
		errs = append(errs, errors.New("kafka.sasl.mechanism PLAIN: refused without kafka.tls outside development mode: PLAIN sends the password as it is; enable kafka.tls or use SCRAM-SHA-512"))
	}
	return errors.Join(errs...)
}
