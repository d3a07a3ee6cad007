package interceptor

import "errors"

// ErrNoCredentials is reported when the token file holds no credential and
// no fixed token is configured: every call would be refused.
var ErrNoCredentials = errors.New("no credentials: the token file has no principal:role:token line and control.auth-token is empty")
