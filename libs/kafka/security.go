package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"msgexchange/libs/config"
)

// SASL mechanisms a cluster may require (R-H8).
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// SASL is how every client authenticates to the brokers. The password
// comes from a file (PasswordFile, a mounted Secret) or from the
// configuration file through ${file:PATH} expansion; it is a config.Secret,
// so -print-config and the logs show a mask.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty means no
	// authentication.
	Mechanism string `yaml:"mechanism"`
	// Username is the SASL user.
	Username string `yaml:"username"`
	// Password is the user's password. Prefer PasswordFile, or
	// ${file:PATH} in the configuration file.
	Password config.Secret `yaml:"password"`
	// PasswordFile is a file holding the password (trailing line breaks
	// dropped). It is read at every authentication, so a rotated Secret is
	// used by the next connection.
	PasswordFile string `yaml:"password_file"`
}

// RegisterFlags registers <prefix>mechanism, <prefix>username,
// <prefix>password and <prefix>password-file.
func (s *SASL) RegisterFlags(prefix string, fs *flag.FlagSet) {
	fs.StringVar(&s.Mechanism, prefix+"mechanism", "", "SASL mechanism of every Kafka connection: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL); PLAIN sends the password as it is, so production requires kafka.tls with it")
	fs.StringVar(&s.Username, prefix+"username", "", "SASL user name")
	fs.Func(prefix+"password", "SASL password; prefer "+prefix+"password-file, or ${file:PATH} in the config file with -config.expand-env, over the command line", func(v string) error {
		s.Password = config.Secret(v)
		return nil
	})
	fs.StringVar(&s.PasswordFile, prefix+"password-file", "", "file holding the SASL password (a mounted secret; read at every authentication, trailing line breaks dropped)")
}

// On reports whether SASL is configured.
func (s *SASL) On() bool { return s.Mechanism != "" }

// Validate reports an unknown mechanism, a missing user or password, both
// a password and a password file, and a password file that cannot be read
// or is empty. prefix names the keys, e.g. "kafka.sasl.".
func (s *SASL) Validate(prefix string) error {
	if !s.On() {
		if s.Username != "" || s.Password != "" || s.PasswordFile != "" {
			return fmt.Errorf("%smechanism: required when a SASL user or password is set (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", prefix)
		}
		return nil
	}
	var errs []error
	switch strings.ToUpper(s.Mechanism) {
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
	default:
		errs = append(errs, fmt.Errorf("%smechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", prefix, s.Mechanism))
	}
	if s.Username == "" {
		errs = append(errs, fmt.Errorf("%susername: required with mechanism %s", prefix, s.Mechanism))
	}
	switch {
	case s.Password != "" && s.PasswordFile != "":
		errs = append(errs, fmt.Errorf("%spassword and %spassword-file: set one, not both", prefix, prefix))
	case s.Password == "" && s.PasswordFile == "":
		errs = append(errs, fmt.Errorf("%spassword-file: required with mechanism %s (or %spassword)", prefix, s.Mechanism, prefix))
	case s.PasswordFile != "":
		if _, err := s.password(); err != nil {
			errs = append(errs, fmt.Errorf("%s%w", prefix, err))
		}
	}
	return errors.Join(errs...)
}

// password returns the password, reading PasswordFile when it is set.
// Errors name the file, never its content.
func (s *SASL) password() (string, error) {
	if s.PasswordFile == "" {
		return s.Password.Reveal(), nil
	}
	b, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("password-file: reading %s: %w", s.PasswordFile, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("password-file: %s is empty", s.PasswordFile)
	}
	return pw, nil
}

// mechanism is the franz-go mechanism of s; the password is fetched at
// every authentication.
func (s SASL) mechanism() sasl.Mechanism {
	switch strings.ToUpper(s.Mechanism) {
	case MechanismPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := s.password()
			return plain.Auth{User: s.Username, Pass: pw}, err
		})
	case MechanismScramSHA512:
		return scram.Sha512(func(context.Context) (scram.Auth, error) {
			pw, err := s.password()
			return scram.Auth{User: s.Username, Pass: pw}, err
		})
	default: // SCRAM-SHA-256; Validate refuses anything else
		return scram.Sha256(func(context.Context) (scram.Auth, error) {
			pw, err := s.password()
			return scram.Auth{User: s.Username, Pass: pw}, err
		})
	}
}

// securityOpts are the TLS dialer, the SASL mechanism and the hook that
// logs why a broker refused a connection and reports it to refusals.
func (c *Config) securityOpts(log *slog.Logger, refusals []Refusals) []kgo.Opt {
	al := &authLog{log: log, mechanism: strings.ToUpper(c.SASL.Mechanism), user: c.SASL.Username, failing: map[string]string{}, closed: map[string]bool{}, report: refusals}
	opts := []kgo.Opt{kgo.WithHooks(al)}
	if c.TLS.On() {
		opts = append(opts, kgo.Dialer(tlsDialer(c.TLS, c.DialTimeout)))
	}
	if c.SASL.On() {
		opts = append(opts, kgo.SASL(c.SASL.mechanism()))
	}
	return opts
}

// tlsDialer dials a broker and completes the TLS handshake within timeout.
// The CA, certificate and key are read at every dial, so certificates
// rotated in a mounted Secret are used by the next connection; the server
// name defaults to the dialled host.
func tlsDialer(t config.TLS, timeout time.Duration) func(ctx context.Context, network, host string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: timeout}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		cfg, err := t.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading kafka.tls.%w", err)
		}
		if cfg.ServerName == "" {
			if h, _, err := net.SplitHostPort(host); err == nil {
				cfg.ServerName = h
			} else {
				cfg.ServerName = host
			}
		}
		conn, err := (&tls.Dialer{NetDialer: nd, Config: cfg}).DialContext(ctx, network, host)
		if err != nil {
			return nil, fmt.Errorf("connecting to kafka broker %s over TLS: %w", host, err)
		}
		return conn, nil
	}
}

// SASL request keys of the Kafka protocol.
const (
	keySASLHandshake    = 17
	keySASLAuthenticate = 36
	keyAPIVersions      = 18
)

// authLog logs, at error level and once per broker and cause until the
// broker is reached again, why a connection was refused: a failed TLS
// handshake (wrong CA, a certificate for another name, no client
// certificate) or a failed SASL authentication (wrong user or password, a
// mechanism the broker does not offer). franz-go retries such connections
// quietly, and a broker that rejects credentials may simply close the
// connection, so without this line an operator would see only timeouts.
// It is also the one place that tells refusals from other failures: each
// of report hears of every refusal and of every request past
// authentication.
type authLog struct {
	log       *slog.Logger
	mechanism string
	user      string

	nfailing atomic.Int32 // len(failing), read without the lock on every request
	mu       sync.Mutex
	failing  map[string]string // broker address -> cause last logged
	// closed holds the brokers that closed the connection in the middle
	// of a SASL exchange once, with no sign since that they went away
	// (closedInSASL); nclosed is len(closed), read without the lock.
	closed  map[string]bool
	nclosed atomic.Int32

	report []Refusals
}

// Refusals is told when a broker refuses this client's TLS handshake or
// SASL credentials (Stalled, with the cause) and when a request past
// authentication goes through (Progressed). A refusal repeats until the
// configuration changes, so a loop reports it as a stall and its process
// is not ready (R-L8, R-H8); an unreachable broker is not a refusal.
// progress.Tracker is one.
type Refusals interface {
	Stalled(cause error)
	Progressed()
}

var (
	_ kgo.HookBrokerConnect = (*authLog)(nil)
	_ kgo.HookBrokerE2E     = (*authLog)(nil)
)

// OnBrokerConnect logs a refused TLS handshake; a plain dial error (the
// broker is down) is franz-go's to report.
func (a *authLog) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	if err == nil {
		if a.mechanism == "" {
			a.recovered(addr) // no SASL: the handshake was the last step
		}
		return
	}
	if !isTLSError(err) {
		if conn == nil {
			// Not dialled (franz-go also reports a failed SASL step of a
			// dialled connection here): the broker is unreachable, so a
			// close in the middle of SASL before was it going away.
			a.forgetClosed(addr)
		}
		return
	}
	a.failed(addr, "kafka TLS handshake failed: check kafka.tls.ca-file (the CA that signs the brokers' certificates), kafka.tls.server-name and the client certificate", err)
	a.refused(fmt.Errorf("kafka TLS handshake refused: %w", err))
}

// OnBrokerE2E logs a SASL exchange the broker ended and clears the cause
// once the connection is through.
func (a *authLog) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	err := e2e.Err()
	switch {
	case err == nil && key != keySASLHandshake && key != keySASLAuthenticate && key != keyAPIVersions:
		a.recovered(addr) // a request past authentication went through
		for _, r := range a.report {
			r.Progressed()
		}
	case err != nil && (key == keySASLHandshake || key == keySASLAuthenticate) && !errors.Is(err, syscall.ECONNRESET) && !a.closedInSASL(addr, err):
		// A connection reset in the middle of the exchange is the broker
		// going away (a crash during the handshake), an outage and not a
		// refusal: taken for one, it made a projector not ready while
		// Kafka was down (R-N1; TestReadiness_R_N1_KafkaOutageKeepsTheFlightListServing
		// failed twice in CI on it). A close is a refusal only the second
		// time in a row (closedInSASL).
		a.failed(addr, "kafka SASL authentication failed: the broker refused the credentials or the mechanism; check kafka.sasl.mechanism, kafka.sasl.username and the password", err)
		a.refused(fmt.Errorf("kafka SASL authentication refused: %w", err))
	}
}

// closedInSASL reports whether err, a failed SASL step, is the first time
// the broker at addr closed the connection in the middle of the exchange
// (EOF), which is then not yet taken for a refusal. A broker may refuse
// credentials by closing the connection, and so does one that crashes
// after reading the request: the two differ in what follows. A refusing
// broker closes the next exchange too; a crashed one no longer accepts
// connections, which forgets the close (OnBrokerConnect). So a close is
// a refusal the second time in a row.
func (a *authLog) closedInSASL(addr string, err error) bool {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed[addr] {
		return false
	}
	a.closed[addr] = true
	a.nclosed.Store(int32(len(a.closed)))
	return true
}

// forgetClosed forgets a close in the middle of SASL at addr; it takes no
// lock when there is none, as on every request past authentication.
func (a *authLog) forgetClosed(addr string) {
	if a.nclosed.Load() == 0 {
		return
	}
	a.mu.Lock()
	delete(a.closed, addr)
	a.nclosed.Store(int32(len(a.closed)))
	a.mu.Unlock()
}

// refused tells every Refusals of a refusal.
func (a *authLog) refused(cause error) {
	for _, r := range a.report {
		r.Stalled(cause)
	}
}

func (a *authLog) failed(addr, msg string, err error) {
	cause := msg + ": " + err.Error()
	a.mu.Lock()
	repeat := a.failing[addr] == cause
	a.failing[addr] = cause
	a.nfailing.Store(int32(len(a.failing)))
	a.mu.Unlock()
	level := slog.LevelError
	if repeat {
		level = slog.LevelDebug
	}
	attrs := []any{"broker", addr, "err", err}
	if a.mechanism != "" {
		attrs = append(attrs, "mechanism", a.mechanism, "user", a.user)
	}
	a.log.Log(context.Background(), level, msg, attrs...)
}

func (a *authLog) recovered(addr string) {
	a.forgetClosed(addr)
	if a.nfailing.Load() == 0 {
		return
	}
	a.mu.Lock()
	_, was := a.failing[addr]
	delete(a.failing, addr)
	a.nfailing.Store(int32(len(a.failing)))
	a.mu.Unlock()
	if was {
		a.log.Info("kafka broker connection established again", "broker", addr)
	}
}

// isTLSError reports whether err comes from the TLS handshake rather than
// from reaching the host.
func isTLSError(err error) bool {
	var verify *tls.CertificateVerificationError
	var alert tls.AlertError
	var header tls.RecordHeaderError
	var opErr *net.OpError
	switch {
	case errors.As(err, &verify), errors.As(err, &alert), errors.As(err, &header):
		return true
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		return true // the server's alert, e.g. it wanted a client certificate
	}
	return strings.Contains(err.Error(), "tls:")
}
