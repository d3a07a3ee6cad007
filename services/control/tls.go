package control

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
)

// ServerTLS is the control plane's TLS (R-H9): its certificate and key
// and, for mutual TLS, the CA bundle that signs the client certificates.
// Files, never values, so that keys stay in the mounted Secret; they are
// read again at every new connection, so a rotated certificate is served
// without a restart.
type ServerTLS struct {
	// CertFile and KeyFile are the server certificate (PEM, with its
	// chain) and its private key. Both or neither; neither means
	// plaintext gRPC.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, when set, makes every client present a certificate
	// signed by one of its CAs (mutual TLS); the bearer token is still
	// required.
	ClientCAFile string `yaml:"client_ca_file"`
}

// RegisterFlags registers <prefix>cert-file, <prefix>key-file and
// <prefix>client-ca-file.
func (c *ServerTLS) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&c.CertFile, prefix+"cert-file", "", "PEM file of the control plane's TLS certificate (with "+prefix+"key-file; none: plaintext gRPC)")
	fs.StringVar(&c.KeyFile, prefix+"key-file", "", "PEM file of the TLS certificate's private key (a mounted secret)")
	fs.StringVar(&c.ClientCAFile, prefix+"client-ca-file", "", "PEM file of the CAs that sign client certificates: set, every client must present one (mutual TLS)")
}

// On reports whether the server speaks TLS.
func (c *ServerTLS) On() bool { return c.CertFile != "" || c.KeyFile != "" }

// Validate loads every file once, so that a missing or unreadable file
// refuses to start instead of failing every handshake.
func (c *ServerTLS) Validate(prefix string) error {
	switch {
	case c.CertFile == "" && c.KeyFile == "" && c.ClientCAFile != "":
		return fmt.Errorf("%sclient-ca-file: mutual TLS needs the server's own certificate: set %scert-file and %skey-file", prefix, prefix, prefix)
	case c.CertFile == "" && c.KeyFile == "":
		return nil
	case c.CertFile == "" || c.KeyFile == "":
		return fmt.Errorf("%scert-file and %skey-file: set both, or neither for plaintext", prefix, prefix)
	}
	if _, err := c.config(); err != nil {
		return fmt.Errorf("%s%w", prefix, err)
	}
	return nil
}

// ServerConfig is the tls.Config of the listener: TLS 1.2 or later, the
// files read again for every new connection.
func (c *ServerTLS) ServerConfig() (*tls.Config, error) {
	base, err := c.config()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: base.ClientAuth,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			// A rotated file takes effect here; a file broken mid-rotation
			// fails this handshake only, and the client retries.
			return c.config()
		},
	}, nil
}

// config reads the files.
func (c *ServerTLS) config() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cert-file/key-file: loading %s and %s: %w", c.CertFile, c.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client-ca-file: reading %s: %w", c.ClientCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client-ca-file: %s: %w", c.ClientCAFile, ErrNoCertificate)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
