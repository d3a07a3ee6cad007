package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/config"
	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/tlstest"
)

// logBuffer collects log lines for assertions.
type logBuffer struct{ testutil.LogBuffer }

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// secureBroker is a broker that accepts only TLS connections presenting a
// client certificate of ca, authenticated by SASL as user/pass.
type secureBroker struct {
	ca     *tlstest.CA
	client tlstest.Pair
	cfg    kafka.Config // a client configuration with the right credentials
}

const (
	brokerUser = "msgx"
	brokerPass = "correct horse battery staple"
)

func newSecureBroker(t *testing.T, mechanism string) *secureBroker {
	t.Helper()
	ca := tlstest.NewCA(t, "kafka")
	b := &secureBroker{ca: ca, client: ca.Client("msgx-client")}
	b.cfg = kafkatest.DefaultConfig()
	b.cfg.DialTimeout = 2 * time.Second
	b.cfg.TLS = config.TLS{CAFile: ca.File, CertFile: b.client.CertFile, KeyFile: b.client.KeyFile}
	b.cfg.SASL = kafka.SASL{Mechanism: mechanism, Username: brokerUser, PasswordFile: writeFile(t, "password", brokerPass+"\n")}
	require.NoError(t, b.cfg.Validate())
	kafkatest.NewCluster(t, &b.cfg,
		kfake.TLS(tlstest.ServerConfig(ca.Server("broker"), ca)),
		kfake.EnableSASL(),
		kfake.Superuser(mechanism, brokerUser, brokerPass),
	)
	return b
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func newClient(t *testing.T, cfg kafka.Config, log *slog.Logger, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(cfg.ClientOpts(log, "test"), extra...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// pingFails pings until the deadline and returns the error; a refused
// client never succeeds.
func pingFails(t *testing.T, cl *kgo.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := cl.Ping(ctx)
	require.Error(t, err, "a client with the wrong credentials must be refused")
	return err
}

// TestClient_R_H8_TLSAndSASLProduceAndConsume: with TLS (the cluster's CA,
// a client certificate the broker requires) and each SASL mechanism, the
// options every client is built from produce a record and consume it back;
// the password comes from a file.
func TestClient_R_H8_TLSAndSASLProduceAndConsume(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{kafka.MechanismPlain, kafka.MechanismScramSHA256, kafka.MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			b := newSecureBroker(t, mech)
			var logs logBuffer
			topic := b.cfg.Topics.Msg
			cl := newClient(t, b.cfg, logs.logger(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("1"), Value: []byte("secured")}).FirstErr())
			var got []string
			for len(got) == 0 {
				fs := cl.PollFetches(ctx)
				require.NoError(t, fs.Err0())
				fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			require.Equal(t, []string{"secured"}, got)
			require.NotContains(t, logs.String(), "failed", "a working connection logs no refusal")
			require.NotContains(t, logs.String(), brokerPass)
		})
	}
}

// TestClient_R_H8_WrongPasswordRefused: a client with the wrong password
// (or an unknown user) is refused, and the log names the cause, the
// mechanism and the user, never the password; the cause is logged once,
// not at every retry.
func TestClient_R_H8_WrongPasswordRefused(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{kafka.MechanismPlain, kafka.MechanismScramSHA256, kafka.MechanismScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			b := newSecureBroker(t, mech)
			for name, mutate := range map[string]func(*kafka.Config){
				"WrongPassword": func(c *kafka.Config) { c.SASL.PasswordFile = writeFile(t, "pw", "wrong password") },
				"UnknownUser":   func(c *kafka.Config) { c.SASL.Username = "intruder" },
			} {
				cfg := b.cfg
				mutate(&cfg)
				var logs logBuffer
				cl := newClient(t, cfg, logs.logger())
				pingFails(t, cl)
				require.Eventually(t, func() bool {
					return strings.Contains(logs.String(), "kafka SASL authentication failed")
				}, 10*time.Second, 10*time.Millisecond, "%s: no clear log line: %s", name, logs.String())
				out := logs.String()
				t.Logf("%s: %s", name, out)
				require.Contains(t, out, "mechanism="+mech, name)
				require.Contains(t, out, "user="+cfg.SASL.Username, name)
				require.NotContains(t, out, "wrong password", name)
				require.NotContains(t, out, brokerPass, name)
				require.Equal(t, 1, strings.Count(out, "kafka SASL authentication failed"), "%s: the cause is logged once per broker: %s", name, out)
			}
		})
	}
}

// TestClient_R_H8_WrongCARefused: a client that trusts another CA refuses
// the broker's certificate, a client without a certificate is refused by
// the broker, and a client without TLS never gets an answer; the first two
// log the TLS cause.
func TestClient_R_H8_WrongCARefused(t *testing.T) {
	t.Parallel()
	b := newSecureBroker(t, kafka.MechanismScramSHA256)
	other := tlstest.NewCA(t, "other")
	impostor := other.Client("msgx-client")

	cases := []struct {
		name   string
		mutate func(*kafka.Config)
		err    string
	}{
		{"OtherCA", func(c *kafka.Config) { c.TLS.CAFile = other.File }, "certificate signed by unknown authority"},
		{"NoClientCertificate", func(c *kafka.Config) { c.TLS.CertFile, c.TLS.KeyFile = "", "" }, "certificate required"},
		// The broker names the CAs it accepts, so the client has no
		// certificate to offer.
		{"ClientCertificateOfOtherCA", func(c *kafka.Config) { c.TLS.CertFile, c.TLS.KeyFile = impostor.CertFile, impostor.KeyFile }, "certificate required"},
		{"WrongServerName", func(c *kafka.Config) { c.TLS.ServerName = "kafka.example.org" }, "kafka.example.org"},
	}
	for _, tc := range cases {
		cfg := b.cfg
		tc.mutate(&cfg)
		require.NoError(t, cfg.Validate(), tc.name)
		var logs logBuffer
		cl := newClient(t, cfg, logs.logger())
		err := pingFails(t, cl)
		require.Eventually(t, func() bool {
			return strings.Contains(logs.String(), "kafka TLS handshake failed")
		}, 10*time.Second, 10*time.Millisecond, "%s: no clear log line: %s", tc.name, logs.String())
		require.Contains(t, logs.String(), tc.err, tc.name)
		t.Logf("%s: ping: %v", tc.name, err)
	}

	plain := b.cfg
	plain.TLS = config.TLS{}
	cl := newClient(t, plain, slog.New(slog.DiscardHandler))
	pingFails(t, cl)
}

// TestConfig_R_H8_ValidateSecurity: every misconfiguration of TLS or SASL
// refuses to start with the key named, before anything connects.
func TestConfig_R_H8_ValidateSecurity(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "kafka")
	pair := ca.Client("c")
	pw := writeFile(t, "pw", "s3cret\n")
	empty := writeFile(t, "empty", "\n")
	notPEM := writeFile(t, "ca.der", "not a certificate")
	missing := filepath.Join(t.TempDir(), "missing")

	cases := []struct {
		name   string
		mutate func(*kafka.Config)
		want   string
	}{
		{"UnknownMechanism", func(c *kafka.Config) { c.SASL = kafka.SASL{Mechanism: "GSSAPI", Username: "u", PasswordFile: pw} }, `kafka.sasl.mechanism "GSSAPI": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"UserWithoutMechanism", func(c *kafka.Config) { c.SASL = kafka.SASL{Username: "u"} }, "kafka.sasl.mechanism: required"},
		{"NoUser", func(c *kafka.Config) { c.SASL = kafka.SASL{Mechanism: "PLAIN", PasswordFile: pw} }, "kafka.sasl.username: required"},
		{"NoPassword", func(c *kafka.Config) { c.SASL = kafka.SASL{Mechanism: "SCRAM-SHA-512", Username: "u"} }, "kafka.sasl.password-file: required"},
		{"PasswordTwice", func(c *kafka.Config) {
			c.SASL = kafka.SASL{Mechanism: "PLAIN", Username: "u", Password: "x", PasswordFile: pw}
		}, "set one, not both"},
		{"MissingPasswordFile", func(c *kafka.Config) {
			c.SASL = kafka.SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: missing}
		}, "kafka.sasl.password-file: reading " + missing},
		{"EmptyPasswordFile", func(c *kafka.Config) {
			c.SASL = kafka.SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: empty}
		}, "is empty"},
		{"MissingCA", func(c *kafka.Config) { c.TLS = config.TLS{CAFile: missing} }, "kafka.tls.ca-file: reading " + missing},
		{"CAWithoutCertificate", func(c *kafka.Config) { c.TLS = config.TLS{CAFile: notPEM} }, "no PEM certificate"},
		{"CertWithoutKey", func(c *kafka.Config) { c.TLS = config.TLS{CertFile: pair.CertFile} }, "set both"},
		{"KeyOfAnotherCert", func(c *kafka.Config) {
			c.TLS = config.TLS{CertFile: pair.CertFile, KeyFile: ca.Client("d").KeyFile}
		}, "kafka.tls.cert-file/key-file: loading"},
	}
	for _, tc := range cases {
		cfg := kafkatest.DefaultConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		require.ErrorContains(t, err, tc.want, tc.name)
		require.NotContains(t, err.Error(), "s3cret", tc.name)
	}
	if err := (&config.TLS{CAFile: notPEM}).Validate("kafka.tls."); err != nil {
		require.ErrorIs(t, err, config.ErrNoCertificate)
	}
}

// TestConfig_R_H8_FlagsAndMaskedPassword: the flags and YAML keys set TLS
// and SASL, a lower-case mechanism is accepted, and -print-config masks the
// password.
func TestConfig_R_H8_FlagsAndMaskedPassword(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "kafka")
	pair := ca.Client("c")
	var c kafka.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags("kafka.", fs)
	require.NoError(t, fs.Parse([]string{
		"-kafka.tls.ca-file=" + ca.File, "-kafka.tls.cert-file=" + pair.CertFile, "-kafka.tls.key-file=" + pair.KeyFile,
		"-kafka.sasl.mechanism=scram-sha-512", "-kafka.sasl.username=msgx", "-kafka.sasl.password=hunter2-hunter2",
	}))
	require.True(t, c.TLS.On())
	require.NoError(t, c.Validate())

	var y struct {
		Kafka kafka.Config `yaml:"kafka"`
	}
	require.NoError(t, config.Unmarshal([]byte("kafka:\n  tls:\n    enabled: true\n    server_name: kafka.internal\n  sasl:\n    mechanism: PLAIN\n    username: u\n    password_file: /run/secrets/pw\n"), &y))
	require.Equal(t, config.TLS{Enabled: true, ServerName: "kafka.internal"}, y.Kafka.TLS)
	require.Equal(t, kafka.SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: "/run/secrets/pw"}, y.Kafka.SASL)

	var out bytes.Buffer
	require.NoError(t, config.Print(&out, c))
	require.NotContains(t, out.String(), "hunter2")
	require.Contains(t, out.String(), "password: '********'")
}

// refusalCount counts what a client's hook reports to a Refusals.
type refusalCount struct{ stalled, progressed atomic.Int32 }

func (r *refusalCount) Stalled(error) { r.stalled.Add(1) }
func (r *refusalCount) Progressed()   { r.progressed.Add(1) }

// TestClient_R_N1_ABrokerGoneInTheMiddleOfSASLIsNoRefusal: the broker goes
// away in the middle of a client's SASL exchange (it crashed during the
// handshake; here a proxy in front of it cuts the connection when the
// SASL request arrives). That is an outage, which the client outlasts by
// itself, not a refusal of its credentials: nothing is reported stalled,
// so a process stays ready through a Kafka outage (R-N1). Once the broker
// answers, the same client goes through.
//
// The connection ends in one of two ways. Reset: the broker died before
// reading the request. Closed: it died after reading it, and its next
// connection is refused (the broker is down); a broker that refuses
// credentials by closing the connection closes the next exchange too,
// and that is a refusal.
func TestClient_R_N1_ABrokerGoneInTheMiddleOfSASLIsNoRefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cut  int32
	}{{"Reset", cutReset}, {"Closed", cutClose}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy, cl, logs, refusals := behindSASLCutProxy(t, tc.cut)
			proxy.downAfterCut.Store(tc.cut == cutClose) // the crashed broker refuses connections
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			require.Error(t, cl.Ping(ctx))
			cancel()
			require.Positive(t, proxy.cuts.Load(), "the proxy cut connections in the middle of SASL")
			require.Zero(t, refusals.stalled.Load(), "a broker gone in the middle of SASL is an outage, not a refusal: %s", logs.String())
			require.NotContains(t, logs.String(), "kafka SASL authentication failed")

			proxy.cut.Store(cutNone)
			proxy.up(t)
			ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, cl.Ping(ctx))
			require.Zero(t, refusals.stalled.Load())
		})
	}
}

// TestClient_R_H8_ABrokerThatClosesEverySASLExchangeRefuses: a broker that
// closes the connection at every SASL exchange while it accepts
// connections refuses the credentials: the second close is reported.
func TestClient_R_H8_ABrokerThatClosesEverySASLExchangeRefuses(t *testing.T) {
	t.Parallel()
	proxy, cl, logs, refusals := behindSASLCutProxy(t, cutClose)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_ = cl.Ping(ctx)
		return refusals.stalled.Load() > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, proxy.cuts.Load(), int32(2), "reported at the second close, not the first")
	require.Contains(t, logs.String(), "kafka SASL authentication failed")
}

// behindSASLCutProxy starts a broker that requires SCRAM-SHA-512 and a
// saslCutProxy in front of it that cuts as cut says, and returns a client
// of the proxy with its log and what its hook reported.
func behindSASLCutProxy(t *testing.T, cut int32) (*saslCutProxy, *kgo.Client, *logBuffer, *refusalCount) {
	t.Helper()
	cfg := kafkatest.DefaultConfig()
	cfg.DialTimeout = 2 * time.Second
	cfg.SASL = kafka.SASL{Mechanism: kafka.MechanismScramSHA512, Username: brokerUser, PasswordFile: writeFile(t, "password", brokerPass+"\n")}
	kafkatest.NewCluster(t, &cfg, kfake.EnableSASL(), kfake.Superuser(kafka.MechanismScramSHA512, brokerUser, brokerPass))
	proxy := newSASLCutProxy(t, cfg.Brokers)
	proxy.cut.Store(cut)
	cfg.Brokers = proxy.addr
	logs, refusals := &logBuffer{}, &refusalCount{}
	cl, err := kgo.NewClient(cfg.ClientOpts(logs.logger(), "test", refusals)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return proxy, cl, logs, refusals
}

// How saslCutProxy ends a connection whose SASL request arrives.
const (
	cutNone  int32 = iota
	cutReset       // RST: connection reset by peer
	cutClose       // FIN: the client reads EOF
)

// saslCutProxy forwards Kafka connections to a broker and, as cut says,
// ends a client's connection when its SASL handshake or authenticate
// request arrives; with downAfterCut it then stops listening, as a broker
// that crashed there refuses the next connection, until up.
type saslCutProxy struct {
	addr         string
	broker       string
	cut          atomic.Int32
	downAfterCut atomic.Bool
	cuts         atomic.Int32

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newSASLCutProxy(t *testing.T, broker string) *saslCutProxy {
	t.Helper()
	p := &saslCutProxy{broker: broker, conns: map[net.Conn]bool{}}
	p.listen(t, "127.0.0.1:0")
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

// up listens again on the proxy's address after a down.
func (p *saslCutProxy) up(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	ln := p.ln
	p.mu.Unlock()
	if ln == nil {
		p.listen(t, p.addr)
	}
}

func (p *saslCutProxy) listen(t *testing.T, addr string) {
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", p.broker)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			p.conns[client], p.conns[server] = true, true
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { // broker to client, as it is
				defer p.wg.Done()
				_, _ = io.Copy(client, server)
				_ = client.Close()
			}()
			go func() { // client to broker, frame by frame
				defer p.wg.Done()
				defer server.Close()
				p.forward(client.(*net.TCPConn), server)
			}()
		}
	}()
}

// down stops listening and ends every connection: the broker is gone.
func (p *saslCutProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// forward copies the client's request frames to server until one is a
// SASL request to cut.
func (p *saslCutProxy) forward(client *net.TCPConn, server net.Conn) {
	for {
		var size [4]byte
		if _, err := io.ReadFull(client, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(client, frame); err != nil || len(frame) < 2 {
			return
		}
		if key := binary.BigEndian.Uint16(frame); key == 17 || key == 36 {
			if cut := p.cut.Load(); cut != cutNone {
				if cut == cutReset {
					_ = client.SetLinger(0)
				}
				_ = client.Close()
				p.cuts.Add(1)
				if p.downAfterCut.Load() {
					p.down()
				}
				return
			}
		}
		if _, err := server.Write(append(size[:], frame...)); err != nil {
			return
		}
	}
}
