package main

import (
	"errors"
	"fmt"
	"slices"
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
// developer's machine (R-H9, R-H8, R-K1); each refusal names its setting,
// and every refusal of a configuration is reported at once:
//
//   - an unauthenticated control plane (control.insecure-no-auth);
//   - control.auth-token, the single token with every role: whoever holds
//     it is every service and every operator at once, so production gives
//     services and operators separate credentials (R-H9) and the control
//     plane needs control.token-file, one principal:role:token a line;
//   - a lease-holding service without lease.token-file, its own service
//     credential (re-read when it rotates), or with lease.auth-token, a
//     token given as a value;
//   - bearer tokens or data in clear beyond loopback (R-K1): a control
//     plane listening, or a lease client dialling, off loopback without
//     TLS; PostgreSQL to a remote host below sslmode=verify-full; MySQL
//     without verified TLS, or with tls=skip-verify|preferred,
//     allowAllFiles or allowCleartextPasswords; redis:// to a remote host;
//     remote Kafka brokers without TLS or without a client credential;
//     plaintext OTLP export to a remote receiver; SASL PLAIN without TLS;
//   - a compat entry without a token file or without allowed networks
//     (R-K1: one forged POST deleted a day's flights);
//   - an admin port (admin.addr) beyond loopback (R-N2): pprof serves the
//     process's memory, credentials included, without a credential; it is
//     reached through kubectl port-forward.
//
// Each dependency is judged only where a selected target uses it. The
// token files themselves refuse the development token and tokens
// shorter than 32 bytes in every mode, when they are parsed (the control
// plane's by control.Validate, the lease client's by lease.Validate, the
// compat entry's by ingest.Validate). Tokens are never printed.
func (c *Config) validateMode(need map[string]bool, targets []string) error {
	switch c.Mode {
	case ModeDevelopment:
		return nil
	case ModeProduction:
	default:
		return fmt.Errorf("mode %q: want %s or %s", c.Mode, ModeProduction, ModeDevelopment)
	}
	var errs []error
	control := slices.Contains(targets, "control")
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
		errs = append(errs, c.Control.ValidateProduction())
	}
	if need["lease"] {
		if c.Lease.TokenFile == "" {
			errs = append(errs, errors.New("lease.token-file: required outside development mode: the file holding this service's own token, the token of a principal:service:token line of the control plane's control.token-file"))
		}
		if c.Lease.AuthToken != "" {
			errs = append(errs, errors.New("lease.auth-token: refused outside development mode: put this service's token in lease.token-file, which is re-read when the token rotates"))
		}
		errs = append(errs, c.Lease.ValidateProduction("lease."))
	}
	if need["pg"] {
		errs = append(errs, c.Postgres.ValidateProduction())
	}
	if need["mysql"] {
		errs = append(errs, c.Mailbox.ValidateProduction())
	}
	if need["redis"] {
		errs = append(errs, c.Redis.ValidateProduction())
	}
	if need["kafka"] {
		errs = append(errs, c.Kafka.ValidateProduction())
	}
	if slices.Contains(targets, "ingest") {
		errs = append(errs, c.Ingest.ValidateProduction("ingest."))
	}
	errs = append(errs, c.Tracing.ValidateProduction())
	errs = append(errs, c.Admin.ValidateProduction("admin."))
	return errors.Join(errs...)
}
