package private

import (
	"crypto/tls"

	"msgexchange/libs/testutil/tlstest"
)

// Option changes how a private instance is set up.
type Option func(*options)

type options struct {
	ca *tlstest.CA
}

// WithTLS makes the server accept TLS with a certificate for loopback
// issued by ca, and verify the client certificates of ca: PostgreSQL
// refuses plaintext and authenticates every role but postgres by its
// certificate (CN = role), MariaDB offers TLS (users created REQUIRE X509
// need a certificate), Redis listens only for TLS and requires a client
// certificate.
func WithTLS(ca *tlstest.CA) Option { return func(o *options) { o.ca = ca } }

func newOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// helperTLS is the client side the helpers use to wait for a TLS server:
// it trusts ca and presents a certificate of ca.
func helperTLS(ca *tlstest.CA, client tlstest.Pair) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS}, ServerName: "127.0.0.1"}
}
