// Package caller carries the authenticated caller of a control-plane call
// — the principal named by its credential, its roles and the peer address
// of the connection — from the authentication interceptor to the handlers,
// which record principal and peer in every audit row (R-H9) and bind a
// lease term to the principal that acquired it. It is its own package so
// that handlers depend on the caller's identity, not on how it was proved.
package caller
