package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/private"
)

// newTestBroker builds this program and starts its broker command as a
// private process with a data directory of its own, for tests that crash
// and restart it.
func newTestBroker(t *testing.T) *private.Broker {
	t.Helper()
	testutil.Integration(t)
	bin := filepath.Join(t.TempDir(), "devstack")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building devstack: %v\n%s", err, out)
	}
	return private.NewBroker(t, bin)
}
