package control

import "errors"

// ErrAuthTokenRequired is reported by Config.Validate when neither a token
// file nor an auth token is configured and control.insecure-no-auth is not
// set (R-F3, R-H9).
var ErrAuthTokenRequired = errors.New("control.token-file or control.auth-token: required so that the control plane refuses unauthenticated calls; mount a token file of principal:role:token lines (see docs/security.md), or set control.insecure-no-auth=true in development configurations only")

// ErrNoPostgres is returned by New when Deps.Postgres is nil.
var ErrNoPostgres = errors.New("control: Deps.Postgres is required; every answer of the control plane comes from PostgreSQL")

// ErrNoCertificate is reported when control.tls.client-ca-file holds no PEM
// certificate: the server would trust no client certificate at all.
var ErrNoCertificate = errors.New("no PEM certificate in the file")
