// Package tlstest makes throwaway certificate authorities and certificates
// for one test: a CA, server certificates for loopback, and client
// certificates for mutual TLS, written as PEM files into the test's
// temporary directory, the way a deployment mounts them from a Secret.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority whose certificate is in File.
type CA struct {
	t    testing.TB
	dir  string
	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the PEM file of the CA's certificate.
	File string
}

// Pair is an issued certificate and its key, as PEM files and loaded.
type Pair struct {
	CertFile string
	KeyFile  string
	TLS      tls.Certificate
}

// NewCA creates a CA named name, valid for an hour around now.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("creating CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parsing CA certificate: %v", err)
	}
	ca := &CA{t: t, dir: t.TempDir(), name: name, cert: cert, key: key}
	ca.File = ca.write(name+"-ca.crt", "CERTIFICATE", der)
	return ca
}

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost
// (and any extra DNS names).
func (ca *CA) Server(name string, dnsNames ...string) Pair {
	ca.t.Helper()
	return ca.issue(name, x509.ExtKeyUsageServerAuth, append([]string{"localhost"}, dnsNames...),
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
}

// Client issues a client certificate whose common name is user (the name
// servers such as PostgreSQL map to a role).
func (ca *CA) Client(user string) Pair {
	ca.t.Helper()
	return ca.issue(user, x509.ExtKeyUsageClientAuth, nil, nil)
}

// ServerConfig is a server-side configuration presenting pair; when
// clientCAs is not nil, clients must present a certificate signed by it.
func ServerConfig(pair Pair, clientCAs *CA) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair.TLS}}
	if clientCAs != nil {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = clientCAs.Pool()
	}
	return cfg
}

func (ca *CA) issue(cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) Pair {
	ca.t.Helper()
	key := newKey(ca.t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(ca.t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatalf("issuing certificate %s: %v", cn, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatalf("encoding key of %s: %v", cn, err)
	}
	p := Pair{
		CertFile: ca.write(cn+".crt", "CERTIFICATE", der),
		KeyFile:  ca.write(cn+".key", "PRIVATE KEY", keyDER),
	}
	if p.TLS, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
		ca.t.Fatalf("loading certificate %s: %v", cn, err)
	}
	return p
}

func (ca *CA) write(name, typ string, der []byte) string {
	ca.t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatalf("writing %s: %v", path, err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generating key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatalf("generating serial number: %v", err)
	}
	return n
}
