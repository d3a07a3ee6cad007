package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
)

// TLS is the client side of a TLS connection to a server of the system
// (Kafka, MySQL, Redis), read from files: the CA bundle that signs the
// server's certificate and, for mutual TLS, the client's certificate and
// key. Keys travel as file paths, never as values, so that the key stays in
// the mounted Secret and never passes through the configuration, a flag or
// the environment.
type TLS struct {
	// Enabled turns TLS on. It is implied by any of the files below.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the certificate authorities trusted to
	// sign the server's certificate, instead of the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate and its private key
	// (PEM), presented when the server asks for one (mutual TLS).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry, when it
	// differs from the host the client dials.
	ServerName string `yaml:"server_name"`
}

// RegisterFlags registers <prefix>enabled, <prefix>ca-file,
// <prefix>cert-file, <prefix>key-file and <prefix>server-name; what names
// the server ("Kafka brokers") in the help texts.
func (c *TLS) RegisterFlags(prefix, what string, fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, prefix+"enabled", false, "connect to the "+what+" over TLS (implied by any of the "+prefix+"* files)")
	fs.StringVar(&c.CAFile, prefix+"ca-file", "", "PEM file of the certificate authorities that sign the certificates of the "+what+" (default: the system's roots)")
	fs.StringVar(&c.CertFile, prefix+"cert-file", "", "PEM file of the client certificate presented to the "+what+" (mutual TLS; with "+prefix+"key-file)")
	fs.StringVar(&c.KeyFile, prefix+"key-file", "", "PEM file of the client certificate's private key (a mounted secret; with "+prefix+"cert-file)")
	fs.StringVar(&c.ServerName, prefix+"server-name", "", "name the certificates of the "+what+" must carry when it differs from the dialled host")
}

// On reports whether TLS is used: enabled explicitly or implied by a file.
func (c *TLS) On() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// Validate loads every file once, so that a missing or unreadable CA,
// certificate or key refuses to start instead of failing the first
// connection. prefix names the keys in the messages, e.g. "kafka.tls.".
func (c *TLS) Validate(prefix string) error {
	if !c.On() {
		return nil
	}
	if _, err := c.ClientConfig(); err != nil {
		return fmt.Errorf("%s%w", prefix, err)
	}
	return nil
}

// ClientConfig reads the files and returns the client configuration:
// TLS 1.2 or later, the server verified against CAFile (or the system's
// roots), the client certificate when one is configured. Called at every
// new connection, it picks up certificates rotated in the mounted Secret.
// Errors name the file, never its content.
func (c *TLS) ClientConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca-file: reading %s: %w", c.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca-file: %s: %w", c.CAFile, ErrNoCertificate)
		}
		cfg.RootCAs = pool
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert-file/key-file: loading %s and %s: %w", c.CertFile, c.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case c.CertFile != "" || c.KeyFile != "":
		return nil, errors.New("cert-file and key-file: set both for a client certificate, or neither")
	}
	return cfg, nil
}
