package lease

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"msgexchange/libs/config"
)

// bearer is the per-call credential carrying a fixed control-plane token.
type bearer struct {
	token  string
	secure bool
}

// GetRequestMetadata returns the authorization header.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is true on a TLS connection, so that gRPC
// never sends the token in the clear once TLS is configured.
func (b bearer) RequireTransportSecurity() bool { return b.secure }

// FileToken is the per-call credential whose token is read from a file
// (a mounted Secret) and read again whenever the file changes, so that a
// rotated token is sent from the next call on, without a restart (R-H9).
// Surrounding white space, such as the newline editors and `kubectl
// create secret --from-file` leave, is dropped.
type FileToken struct {
	path   string
	secure bool

	mu      sync.Mutex
	modTime time.Time
	size    int64
	token   string
}

// NewFileToken returns the credential of the token in path; secure says
// whether it travels over TLS (and must never travel without).
func NewFileToken(path string, secure bool) *FileToken {
	return &FileToken{path: path, secure: secure}
}

// GetRequestMetadata returns the authorization header with the file's
// current token.
func (f *FileToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := f.Token()
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity: see bearer.
func (f *FileToken) RequireTransportSecurity() bool { return f.secure }

// Token returns the file's token, reading the file again when its
// modification time or size changed since the last read. A file that
// cannot be read or holds no token — a Secret caught half-way through an
// update — leaves the last good token in use: a lease holder must not
// lose its term to a rotation. Only a file never read successfully fails.
func (f *FileToken) Token() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err == nil && f.token != "" && fi.ModTime().Equal(f.modTime) && fi.Size() == f.size {
		return f.token, nil
	}
	var tok string
	if err == nil {
		tok, err = readTokenFile(f.path)
	}
	if err != nil {
		if f.token != "" {
			return f.token, nil
		}
		return "", fmt.Errorf("reading the control-plane token: %w", err)
	}
	f.token, f.modTime, f.size = tok, fi.ModTime(), fi.Size()
	return tok, nil
}

// MinTokenBytes is the shortest token a token file may hold, as the
// control plane's token file requires of every credential (R-H9).
const MinTokenBytes = 32

// DevelopmentToken is the public token of the development configuration;
// a token file never holds it.
const DevelopmentToken = "dev-token"

// readTokenFile reads a token file: one token, white space around it
// dropped, none inside, at least MinTokenBytes and not DevelopmentToken
// (the control plane would refuse both). Errors name the file and the
// token's line, never the token.
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the control-plane token: %w", err)
	}
	tok := string(bytes.TrimSpace(data))
	line := 1 + bytes.Count(data[:len(data)-len(bytes.TrimLeft(data, " \t\r\n"))], []byte("\n"))
	switch {
	case tok == "":
		return "", fmt.Errorf("control-plane token file %s: %w", path, ErrEmptyToken)
	case bytes.ContainsAny([]byte(tok), " \t\r\n"):
		return "", fmt.Errorf("control-plane token file %s: holds more than one word; want the token alone", path)
	case tok == DevelopmentToken:
		return "", fmt.Errorf("control-plane token file %s: line %d: the public development token is refused; want the service's random token of at least %d bytes (openssl rand -hex 32)", path, line, MinTokenBytes)
	case len(tok) < MinTokenBytes:
		return "", fmt.Errorf("control-plane token file %s: line %d: the token is shorter than %d bytes (%d bytes); want the service's random token (openssl rand -hex 32)", path, line, MinTokenBytes, len(tok))
	}
	return tok, nil
}

// ClientTLS is the client TLS configuration for the control plane from c:
// the server verified against c's CA (or the system's roots), and the
// client certificate, when configured, read again at every handshake so
// that a rotated certificate is presented without a restart.
func ClientTLS(c config.TLS) (*tls.Config, error) {
	cfg, err := c.ClientConfig()
	if err != nil {
		return nil, err
	}
	if len(cfg.Certificates) == 0 {
		return cfg, nil
	}
	var (
		mu   sync.Mutex
		last = cfg.Certificates[0]
	)
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			last = cert
		}
		// On an error (a file half-way through rotation) the last good
		// certificate is presented.
		out := last
		return &out, nil
	}
	return cfg, nil
}
