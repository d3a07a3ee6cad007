package testutil

import (
	"os"
	"testing"
)

// AllowSkipEnv names the variable by which a caller opts into skipping
// tests whose database, tool or corpus is missing (MSGX_TEST_ALLOW_SKIP=1).
const AllowSkipEnv = "MSGX_TEST_ALLOW_SKIP"

// Required reports whether a missing integration dependency must fail the
// test instead of skipping it. It does, unless the caller opted into
// skipping with MSGX_TEST_ALLOW_SKIP=1: a green run must mean that every
// test ran, on a developer's machine as in CI. CI=true and
// REQUIRE_INTEGRATION=1 always require, even when skipping was allowed.
func Required() bool {
	if os.Getenv("CI") == "true" || os.Getenv("REQUIRE_INTEGRATION") == "1" {
		return true
	}
	return os.Getenv(AllowSkipEnv) != "1"
}

// Integration marks a test that needs something beyond the Go toolchain —
// a database, Redis, a program such as kcat or chromium, the shared corpus
// — and skips it under -short, so that `go test -short` (make test-unit)
// runs exactly the tests that need nothing.
func Integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a database, a tool or the shared corpus: skipped under -short")
	}
}

// Unavailable fails the test under Required, else skips it.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is required but unavailable: %v (set %s=1 to skip instead)", what, err, AllowSkipEnv)
	}
	t.Skipf("%s unavailable (%v); skipped because %s=1", what, err, AllowSkipEnv)
}

// Env returns the environment variable or def.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
