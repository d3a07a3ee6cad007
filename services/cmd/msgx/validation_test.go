package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun_R_F6_SingleActiveTargetsRefuseToStartWithoutALease: the binary
// refuses to start a single-active component (processor, dispatcher,
// ingest's scanner, alone or in all-in-one) without a lease: the missing
// control-plane address is a configuration error reported before anything
// is connected, with the R-F6 hint. Targets that are not single-active
// (projector, control, migrate) do not need one. Production code has no
// in-memory stand-ins to fall back to: every dependency is real or the
// process does not start. Duplicate instances are excluded by the leases
// (TestFailover_R_B8_*, TestElector_R_B8_CLM_6_NeverTwoActiveAtOnce);
// workers exit on shutdown (TestService_R_F7_*, TestElector_ShutdownReleasesAndReturnsNil).
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断" (unsafe start
// refused); R-F6, R-B8.
func TestRun_R_F6_SingleActiveTargetsRefuseToStartWithoutALease(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"processor", "dispatcher", "ingest", "all", "control,processor"} {
		t.Run(strings.ReplaceAll(target, ",", "+"), func(t *testing.T) {
			t.Parallel()
			err := run([]string{"-target=" + target, "-lease.control-addr="})
			require.Error(t, err)
			require.ErrorContains(t, err, "invalid configuration")
			require.ErrorContains(t, err, "lease.control-addr: required")
			require.ErrorContains(t, err, "production never runs without a lease (R-F6)")
		})
	}
	for _, target := range []string{"projector", "control", "migrate"} {
		t.Run(target+"NeedsNoLease", func(t *testing.T) {
			t.Parallel()
			cfg, _, err := loadConfig([]string{"-target=" + target, "-lease.control-addr="})
			require.NoError(t, err)
			if err := cfg.Validate(); err != nil {
				require.NotContains(t, err.Error(), "lease.")
			}
		})
	}
}

// TestRun_R_F6_InvalidLeaseSettingsAreRefused: a lease address that is not
// host:port and a TTL below one second are refused, all problems at once.
func TestRun_R_F6_InvalidLeaseSettingsAreRefused(t *testing.T) {
	t.Parallel()
	err := run([]string{"-target=dispatcher", "-lease.control-addr=control", "-lease.ttl=10ms"})
	require.ErrorContains(t, err, `lease.control-addr "control": want host:port`)
	require.ErrorContains(t, err, "lease.ttl 10ms: must be at least 1s")
}
