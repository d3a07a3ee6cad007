package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"msgexchange/libs/config"
	"msgexchange/libs/kafka"
	"msgexchange/libs/testutil/kafkatest"
	"msgexchange/libs/testutil/tlstest"
)

// readyz returns a process's /readyz status and body.
func readyz(p *proc) (int, string, error) {
	cl := &http.Client{Timeout: 4 * time.Second}
	resp, err := cl.Get("http://" + p.http + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestProjector_R_H8_SecuredKafkaReadinessAndRefusal: against a cluster
// that takes only mutual TLS and SCRAM-SHA-512, the projector process with
// the right CA, client certificate and password (from files) becomes
// ready; with a wrong password, or trusting another CA, it is refused: it
// stays not-ready, /readyz names Kafka, and its log has one clear line
// with the cause and none with the password.
func TestProjector_R_H8_SecuredKafkaReadinessAndRefusal(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ca := tlstest.NewCA(t, "kafka")
	client := ca.Client("msgx-projector")
	const user, pass = "msgx-projector", "projector password 0123456789"
	secured := kafkatest.DefaultConfig()
	secured.TLS = config.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile}
	dir := t.TempDir()
	secret := func(name, v string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	secured.SASL = kafka.SASL{Mechanism: kafka.MechanismScramSHA512, Username: user, PasswordFile: secret("password", pass)}
	kafkatest.NewCluster(t, &secured,
		kfake.TLS(tlstest.ServerConfig(ca.Server("broker"), ca)),
		kfake.EnableSASL(),
		kfake.Superuser(kafka.MechanismScramSHA512, user, pass),
	)
	args := func(caFile, passwordFile string) []string {
		return []string{
			"-kafka.brokers=" + secured.Brokers,
			"-kafka.tls.ca-file=" + caFile,
			"-kafka.tls.cert-file=" + client.CertFile,
			"-kafka.tls.key-file=" + client.KeyFile,
			"-kafka.sasl.mechanism=SCRAM-SHA-512",
			"-kafka.sasl.username=" + user,
			"-kafka.sasl.password-file=" + passwordFile,
		}
	}
	other := tlstest.NewCA(t, "other")
	const wrongPass = "wrong password 0123456789"
	refused := []struct {
		name, caFile, passwordFile, logLine string
	}{
		{"projector-wrong-password", ca.File, secret("wrong", wrongPass), "kafka SASL authentication failed"},
		{"projector-other-ca", other.File, secret("password2", pass), "kafka TLS handshake failed"},
	}
	for _, tc := range refused {
		p := s.startAs(tc.name, "projector", args(tc.caFile, tc.passwordFile)...)
		logFile := filepath.Join(s.logDir, tc.name+".log")
		var body string
		waitFor(t, 60*time.Second, tc.name+": the refusal logged and /readyz not ready because of Kafka", func() (bool, error) {
			code, b, err := readyz(p)
			if err != nil {
				return false, err
			}
			body = b
			logs, _ := os.ReadFile(logFile)
			return code == http.StatusServiceUnavailable && strings.Contains(b, "kafka") &&
				strings.Contains(string(logs), tc.logLine), fmt.Errorf("status %d: %s", code, b)
		})
		// Still refused after franz-go's retries: not-ready is not a
		// start-up blip, and the cause is not logged at every retry.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			code, b, err := readyz(p)
			if err != nil || code != http.StatusServiceUnavailable {
				t.Fatalf("%s: /readyz %d %s %v, want 503 while refused", tc.name, code, b, err)
			}
		}
		logs, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		out := string(logs)
		if strings.Contains(out, pass) || strings.Contains(out, wrongPass) || strings.Contains(body, wrongPass) {
			t.Fatalf("%s: a password is in the log or /readyz", tc.name)
		}
		// One line per Kafka client of the process (consumer, rebuild
		// loop), not one per retry.
		if n := strings.Count(out, tc.logLine); n < 1 || n > 4 {
			t.Fatalf("%s: want the cause logged once per client, got %d lines:\n%s", tc.name, n, tail(out, 4000))
		}
		t.Logf("%s: /readyz: %s", tc.name, strings.TrimSpace(body))
		s.kill(tc.name)
	}

	ok := s.startAs("projector", "projector", args(ca.File, secured.SASL.PasswordFile)...)
	waitReady(t, ok, "projector with the right credentials")
	logs, err := os.ReadFile(filepath.Join(s.logDir, "projector.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"kafka SASL authentication failed", "kafka TLS handshake failed"} {
		if strings.Contains(string(logs), line) {
			t.Fatalf("the projector with the right credentials logged %q", line)
		}
	}
}
