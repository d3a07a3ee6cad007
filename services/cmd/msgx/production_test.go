package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// selfSigned writes a self-signed certificate for host and its key into a
// directory of the test and returns their paths; the certificate doubles
// as the CA bundle that trusts it.
func selfSigned(t *testing.T, host string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile
}

// secureRemote is a production configuration of every target whose every
// dependency is on another host, each reached the way production mode
// accepts: TLS verified everywhere, a Kafka credential, a compat entry
// with tokens and networks. Each case of the R-K1 test changes one setting
// of it.
func secureRemote(t *testing.T) []string {
	t.Helper()
	cert, key := selfSigned(t, "msgx-control.msgx.svc")
	pw := filepath.Join(t.TempDir(), "kafka-password")
	require.NoError(t, os.WriteFile(pw, []byte("kafka-secret\n"), 0o600))
	return append(credentials(t),
		"-target=all",
		"-control.grpc-addr=0.0.0.0:9095", "-control.tls.cert-file="+cert, "-control.tls.key-file="+key,
		"-lease.control-addr=msgx-control.msgx.svc:9095", "-lease.tls.ca-file="+cert,
		"-postgres.url=postgres://msgx:pg-secret@db.example:5432/msgx?sslmode=verify-full&sslrootcert="+cert,
		"-mysql.dsn=msgx:my-secret@tcp(mailbox.example:3306)/mailbox?tls=true",
		"-redis.url=rediss://:redis-secret@redis.example:6380/0",
		"-kafka.brokers=kafka-0.example:9093,kafka-1.example:9093", "-kafka.tls.enabled",
		"-kafka.sasl.mechanism=SCRAM-SHA-512", "-kafka.sasl.username=msgx", "-kafka.sasl.password-file="+pw,
		"-tracing.otlp-endpoint=collector.example:4317",
		"-ingest.compat.addr=0.0.0.0:8081", "-ingest.compat.token-file="+writeFile(t, strings.Repeat("c", 32)+"\n"),
		"-ingest.compat.allowed-networks=10.20.0.0/16",
	)
}

// refusals splits a validation error into its refusals, one a line.
func refusals(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// TestMode_R_K1_ProductionRefusesEachOpenDoor: outside development mode
// the process refuses to start on each setting that leaves a door open,
// with exactly one refusal naming that setting; a configuration with every
// door closed passes, and several open doors are reported together.
func TestMode_R_K1_ProductionRefusesEachOpenDoor(t *testing.T) {
	t.Parallel()
	base := secureRemote(t)
	require.NoError(t, validate(t, base...), "the secure configuration passes")

	for _, tc := range []struct {
		name    string
		change  []string
		setting string
	}{
		{"CompatWithoutTokenFile", []string{"-ingest.compat.token-file="}, "ingest.compat.token-file: refused"},
		{"CompatWithoutNetworks", []string{"-ingest.compat.allowed-networks="}, "ingest.compat.allowed-networks: refused"},
		{"ControlPlaneWithoutTLS", []string{"-control.tls.cert-file=", "-control.tls.key-file="}, "control.tls: refused"},
		{"ControlPlaneOnEveryInterfaceWithoutTLS", []string{"-control.grpc-addr=:9095", "-control.tls.cert-file=", "-control.tls.key-file="}, "control.tls: refused"},
		{"LeaseClientWithoutTLS", []string{"-lease.tls.ca-file="}, "lease.tls: refused"},
		{"PostgresSSLDisable", []string{"-postgres.url=postgres://msgx:pg-secret@db.example:5432/msgx?sslmode=disable"}, "postgres.url: refused"},
		{"PostgresSSLRequire", []string{"-postgres.url=postgres://msgx:pg-secret@db.example:5432/msgx?sslmode=require"}, "postgres.url: refused"},
		{"PostgresSSLVerifyCA", []string{"-postgres.url=postgres://msgx:pg-secret@db.example:5432/msgx?sslmode=verify-ca"}, "postgres.url: refused"},
		{"PostgresSSLPreferByDefault", []string{"-postgres.url=postgres://msgx:pg-secret@db.example:5432/msgx"}, "postgres.url: refused"},
		{"PostgresOneHostOfTwoLoopback", []string{"-postgres.url=postgres://msgx:pg-secret@127.0.0.1:5432,db.example:5432/msgx?sslmode=require"}, "postgres.url: refused"},
		{"MySQLWithoutTLS", []string{"-mysql.dsn=msgx:my-secret@tcp(mailbox.example:3306)/mailbox"}, "mysql.tls: refused"},
		{"MySQLSkipVerify", []string{"-mysql.dsn=msgx:my-secret@tcp(mailbox.example:3306)/mailbox?tls=skip-verify"}, "mysql.dsn tls=skip-verify: refused"},
		{"MySQLPreferred", []string{"-mysql.dsn=msgx:my-secret@tcp(mailbox.example:3306)/mailbox?tls=preferred"}, "mysql.dsn tls=preferred: refused"},
		{"MySQLAllowAllFiles", []string{"-mysql.dsn=msgx:my-secret@tcp(mailbox.example:3306)/mailbox?tls=true&allowAllFiles=true"}, "mysql.dsn allowAllFiles: refused"},
		{"MySQLCleartextPasswords", []string{"-mysql.dsn=msgx:my-secret@tcp(mailbox.example:3306)/mailbox?tls=true&allowCleartextPasswords=true"}, "mysql.dsn allowCleartextPasswords: refused"},
		{"MySQLLoopbackAllowAllFiles", []string{"-mysql.dsn=root@tcp(127.0.0.1:3306)/mailbox?allowAllFiles=true"}, "mysql.dsn allowAllFiles: refused"},
		{"RedisPlaintext", []string{"-redis.url=redis://:redis-secret@redis.example:6379/0"}, "redis.url: refused"},
		{"KafkaWithoutTLS", []string{"-kafka.tls.enabled=false"}, "kafka.tls: refused"},
		{"KafkaWithoutCredential", []string{"-kafka.sasl.mechanism=", "-kafka.sasl.username=", "-kafka.sasl.password-file="}, "kafka.sasl: refused"},
		{"OTLPInsecure", []string{"-tracing.otlp-insecure"}, "tracing.otlp-insecure: refused"},
		{"AdminPortBeyondLoopback", []string{"-admin.addr=0.0.0.0:6060"}, "admin.addr: refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := validate(t, append(append([]string{}, base...), tc.change...)...)
			require.Error(t, err)
			got := refusals(err)
			require.Len(t, got, 1, "one refusal, naming the setting: %q", got)
			require.Contains(t, got[0], tc.setting)
			require.Contains(t, got[0], "outside development mode")
			for _, secret := range []string{"pg-secret", "my-secret", "redis-secret"} {
				require.NotContains(t, got[0], secret, "a refusal never prints a password")
			}
			require.NoError(t, validate(t, append(append(append([]string{}, base...), tc.change...), "-mode=development")...),
				"development mode accepts it")
		})
	}

	// Several open doors: every refusal in one error.
	err := validate(t, append(append([]string{}, base...), "-redis.url=redis://redis.example:6379/0", "-tracing.otlp-insecure", "-kafka.tls.enabled=false")...)
	require.Len(t, refusals(err), 3, "%v", err)
}

// TestMode_R_K1_LoopbackNeedsNoTLS: a dependency on loopback or a Unix
// socket never crosses the network, so production accepts it in clear:
// a sidecar, or every process of the all-in-one on one host.
func TestMode_R_K1_LoopbackNeedsNoTLS(t *testing.T) {
	t.Parallel()
	require.NoError(t, validate(t, append(credentials(t), "-target=all",
		"-postgres.url=postgres://msgx@localhost:5432/msgx?sslmode=disable",
		"-mysql.dsn=msgx@unix(/run/mysqld/mysqld.sock)/mailbox",
		"-redis.url=redis://[::1]:6379/0",
		"-kafka.brokers=127.0.0.1:9092",
		"-tracing.otlp-endpoint=127.0.0.1:4317", "-tracing.otlp-insecure",
	)...))
}

// TestMode_R_K1_OpenCompatEntryRefusedInProduction is the reproduction: a
// production process on -ingest.compat.addr 0.0.0.0:8081 with neither a
// token file nor allowed networks started, and an unauthenticated POST of
// a forged SCHD DNLD deleted 1,999 of 2,000 flights. Now the start is
// refused, naming both settings; with both set it starts; development mode
// still starts with the entry open.
func TestMode_R_K1_OpenCompatEntryRefusedInProduction(t *testing.T) {
	t.Parallel()
	open := append(credentials(t), "-target=ingest", "-ingest.compat.addr=0.0.0.0:8081")
	err := validate(t, open...)
	require.ErrorContains(t, err, "ingest.compat.token-file: refused outside development mode")
	require.ErrorContains(t, err, "ingest.compat.allowed-networks: refused outside development mode")
	require.NoError(t, validate(t, append(open,
		"-ingest.compat.token-file="+writeFile(t, strings.Repeat("t", 32)+"\n"),
		"-ingest.compat.allowed-networks=10.20.0.0/16")...))
	require.NoError(t, validate(t, "-mode=development", "-target=ingest", "-ingest.compat.addr=0.0.0.0:8081"))
}

// TestMode_R_K7_UnboundServiceLineRefusedInProduction: a token file whose
// service line names no lease (the format before R-K7, whose credential may
// take any lease) is refused in production mode, naming the setting and
// the principals, never a token; bound, it starts; development mode keeps
// accepting the old format.
func TestMode_R_K7_UnboundServiceLineRefusedInProduction(t *testing.T) {
	t.Parallel()
	lines := "dispatcher:service:" + strings.Repeat("d", 32) + "\nprocessor:service=processor:" + goodToken +
		"\ningest:service:" + strings.Repeat("i", 32) + "\nalice:operate:" + operatorToken + "\n"
	args := []string{"-target=control", "-control.token-file=" + writeFile(t, lines)}
	err := validate(t, args...)
	require.Error(t, err)
	got := refusals(err)
	require.Len(t, got, 1, "one refusal: %q", got)
	require.Contains(t, got[0], "control.token-file: refused outside development mode")
	require.Contains(t, got[0], "dispatcher, ingest", "names the unbound principals")
	require.Contains(t, got[0], "lines of dispatcher, ingest name", "a bound line is not named")
	require.NotContains(t, got[0], strings.Repeat("d", 32), "never a token")
	require.NoError(t, validate(t, append(args, "-mode=development")...))

	bound := strings.ReplaceAll(strings.ReplaceAll(lines, "dispatcher:service:", "dispatcher:service=dispatcher/*:"),
		"ingest:service:", "ingest:service=ingest-scanner:")
	require.NoError(t, validate(t, "-target=control", "-control.token-file="+writeFile(t, bound)))
}

// TestMode_R_K1_R_K9_ShortCompatTokenRefusedInEveryMode: a compat token
// shorter than 32 bytes (the 1-byte file the review found accepted) is
// refused at start, in development mode too, naming the line, never the
// token.
func TestMode_R_K1_R_K9_ShortCompatTokenRefusedInEveryMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{ModeProduction, ModeDevelopment} {
		file := writeFile(t, "# senders\n"+strings.Repeat("a", 32)+"\nx\n")
		err := validate(t, append(credentials(t), "-mode="+mode, "-target=ingest", "-ingest.compat.addr=0.0.0.0:8081",
			"-ingest.compat.token-file="+file, "-ingest.compat.allowed-networks=10.0.0.0/8")...)
		require.ErrorContains(t, err, "compat.token-file: compat token file", mode)
		require.ErrorContains(t, err, "line 3: token shorter than 32 bytes", mode)
	}
}

// TestPrintConfig_R_K8_MasksPasswordsInURLsAndDSNs: -print-config printed
// the PostgreSQL and Redis passwords (and the mailbox DSN's); now every
// password inside a URL or DSN is masked, the rest of each connection
// string still shown, and the refusals of -verify-config name the
// settings, never the passwords.
func TestPrintConfig_R_K8_MasksPasswordsInURLsAndDSNs(t *testing.T) {
	t.Parallel()
	args := []string{
		"-postgres.url=postgres://msgx:pg-s3cret@db.example:5432/msgx?sslmode=require",
		"-mysql.dsn=msgx:my-s3cret@tcp(mailbox.example:3306)/mailbox?tls=skip-verify",
		"-redis.url=redis://:redis-s3cret@redis.example:6379/0",
		"-kafka.sasl.mechanism=PLAIN", "-kafka.sasl.username=msgx", "-kafka.sasl.password=kafka-s3cret",
		"-control.auth-token=control-s3cret-0123456789abcdef0123",
	}
	cfg, _, err := loadConfig(args)
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, printConfig(&out, cfg))
	printed := out.String()
	for _, want := range []string{
		"postgres://msgx:********@db.example:5432/msgx?sslmode=require",
		"msgx:********@tcp(mailbox.example:3306)/mailbox?tls=skip-verify",
		"redis://:********@redis.example:6379/0",
	} {
		require.Contains(t, printed, want)
	}
	verr := cfg.Validate()
	require.Error(t, verr)
	for _, secret := range []string{"pg-s3cret", "my-s3cret", "redis-s3cret", "kafka-s3cret", "control-s3cret"} {
		require.NotContains(t, printed, secret)
		require.NotContains(t, verr.Error(), secret)
	}
}
