package control

import "errors"

// ErrAuthTokenRequired is reported by Config.Validate when no auth token is
// configured and control.insecure-no-auth is not set (R-F3).
var ErrAuthTokenRequired = errors.New("control.auth-token: required so that the control plane refuses unauthenticated calls; set a long random token (e.g. from a Kubernetes secret via ${VAR} and -config.expand-env), or set control.insecure-no-auth=true in development configurations only")

// ErrNoPostgres is returned by New when Deps.Postgres is nil.
var ErrNoPostgres = errors.New("control: Deps.Postgres is required; every answer of the control plane comes from PostgreSQL")
