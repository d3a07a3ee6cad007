package testutil

import (
	"os"
	"testing"
)

// Required reports whether a missing integration dependency must fail the
// test instead of skipping it: under CI=true or REQUIRE_INTEGRATION=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("REQUIRE_INTEGRATION") == "1"
}

// Unavailable fails the test under Required, else skips it.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("%s is required but unavailable: %v", what, err)
	}
	t.Skipf("%s unavailable (%v); set it up or run with CI=true to fail instead", what, err)
}

// Env returns the environment variable or def.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
