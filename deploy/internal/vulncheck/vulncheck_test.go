package vulncheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeEntry is an OSV entry of the Go vulnerability database's format for
// github.com/go-sql-driver/mysql, every version affected, in ParseDSN,
// which libs/mysqlutil calls. Its ID is not a real entry's.
const fakeEntry = `{
  "schema_version": "1.3.1",
  "id": "GO-2099-0001",
  "modified": "2099-01-01T00:00:00Z",
  "published": "2099-01-01T00:00:00Z",
  "summary": "Made-up vulnerability proving that the scan fails (R-K8)",
  "details": "Not a real vulnerability: the test of scripts/vuln.sh writes it.",
  "affected": [{
    "package": {"name": "github.com/go-sql-driver/mysql", "ecosystem": "Go"},
    "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}]}],
    "ecosystem_specific": {"imports": [{"path": "github.com/go-sql-driver/mysql", "symbols": ["ParseDSN"]}]}
  }],
  "database_specific": {"url": "https://pkg.go.dev/vuln/GO-2099-0001"}
}
`

// TestVuln_R_K8_ScanFailsOnAReachableVulnerability: scripts/vuln.sh,
// given a database with one entry for a symbol libs calls, exits non-zero
// and names the entry and the call (the scan is limited to
// libs/mysqlutil, which calls it, to keep the test short); so a real entry
// in the pinned database would fail `make test`.
func TestVuln_R_K8_ScanFailsOnAReachableVulnerability(t *testing.T) {
	if testing.Short() {
		t.Skip("builds govulncheck and analyses a module: not in -short")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	db := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(db, "GO-2099-0001.json"), []byte(fakeEntry), 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "vuln.sh"))
	// One package that calls ParseDSN keeps the analysis short.
	cmd.Env = append(os.Environ(), "VULN_DB="+db, "VULN_MODULES=libs", "VULN_PACKAGES=./mysqlutil")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the scan must fail:\n%s", out)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 3, exit.ExitCode(), "govulncheck's exit code for a reachable vulnerability:\n%s", out)
	require.Contains(t, string(out), "GO-2099-0001")
	require.Contains(t, string(out), "mysql.ParseDSN", "the trace names the called symbol")
}
