package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goodToken is 32 bytes, the shortest token production accepts.
const goodToken = "0123456789abcdef0123456789abcdef"

func validate(t *testing.T, args ...string) error {
	t.Helper()
	cfg, _, err := loadConfig(args)
	require.NoError(t, err)
	return cfg.Validate()
}

// TestValidate_R_H9_ProductionRefusesShortTokens: outside development mode
// a control-plane or lease token shorter than 32 bytes refuses to start;
// 32 bytes start. The token itself is never part of the message.
func TestValidate_R_H9_ProductionRefusesShortTokens(t *testing.T) {
	t.Parallel()
	short := goodToken[:31]
	err := validate(t, "-target=control", "-control.auth-token="+short)
	require.ErrorContains(t, err, "control.auth-token: 31 bytes is too short outside development mode; want at least 32 bytes")
	require.NotContains(t, err.Error(), short)

	err = validate(t, "-target=control", "-control.auth-token=x")
	require.ErrorContains(t, err, "control.auth-token: 1 bytes is too short")

	err = validate(t, "-target=processor", "-lease.auth-token="+short)
	require.ErrorContains(t, err, "lease.auth-token: 31 bytes is too short")
	require.NotContains(t, err.Error(), short)

	// A distributed processor without its own lease token uses the
	// control plane's, which is checked as well.
	err = validate(t, "-target=dispatcher", "-control.auth-token="+short)
	require.ErrorContains(t, err, "control.auth-token (the lease client's token): 31 bytes is too short")

	require.NoError(t, validate(t, "-target=control", "-control.auth-token="+goodToken))
	require.NoError(t, validate(t, "-target=processor", "-lease.auth-token="+goodToken))
	require.NoError(t, validate(t, "-target=ingest", "-control.auth-token="+goodToken))
	require.NoError(t, validate(t, "-target=all", "-control.auth-token="+goodToken))
}

// TestValidate_R_H9_ProductionRefusesTheDevelopmentToken: the public
// development token is refused outside development mode, on the control
// plane and on the lease client, and is accepted in development mode.
func TestValidate_R_H9_ProductionRefusesTheDevelopmentToken(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-target=control", "-control.auth-token=dev-token"},
		{"-target=all", "-control.auth-token=dev-token"},
		{"-target=processor", "-lease.auth-token=dev-token"},
	} {
		err := validate(t, args...)
		require.ErrorContains(t, err, "auth-token: the development token is refused outside development mode", args)
		require.NoError(t, validate(t, append(args, "-mode=development")...), args)
	}
}

// TestValidate_R_H9_ProductionRefusesAnUnauthenticatedControlPlane:
// control.insecure-no-auth starts only in development mode; run reports it
// as an invalid configuration before anything is connected.
func TestValidate_R_H9_ProductionRefusesAnUnauthenticatedControlPlane(t *testing.T) {
	t.Parallel()
	err := run([]string{"-target=control", "-control.insecure-no-auth=true"})
	require.ErrorContains(t, err, "invalid configuration")
	require.ErrorContains(t, err, "control.insecure-no-auth: refused outside development mode")

	// Even with a good token, the switch itself is refused.
	err = validate(t, "-target=all", "-control.auth-token="+goodToken, "-control.insecure-no-auth=true")
	require.ErrorContains(t, err, "control.insecure-no-auth: refused outside development mode")

	require.NoError(t, validate(t, "-mode=development", "-target=control", "-control.insecure-no-auth=true"))
	require.NoError(t, validate(t, "-mode=development", "-target=processor"))
	require.NoError(t, validate(t, "-mode=development", "-target=all", "-control.insecure-no-auth=true"))
}

// TestValidate_R_H8_ProductionRefusesSASLPlainWithoutTLS: PLAIN sends the
// password as it is, so outside development mode it needs kafka.tls.
func TestValidate_R_H8_ProductionRefusesSASLPlainWithoutTLS(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pw, []byte("s3cret\n"), 0o600))
	sasl := []string{"-target=projector", "-kafka.sasl.mechanism=PLAIN", "-kafka.sasl.username=msgx", "-kafka.sasl.password-file=" + pw}
	require.ErrorContains(t, validate(t, sasl...), "kafka.sasl.mechanism PLAIN: refused without kafka.tls outside development mode")
	require.NoError(t, validate(t, append(sasl, "-kafka.tls.enabled")...))
	require.NoError(t, validate(t, append(sasl, "-mode=development")...))
	scram := []string{"-target=projector", "-kafka.sasl.mechanism=SCRAM-SHA-512", "-kafka.sasl.username=msgx", "-kafka.sasl.password-file=" + pw}
	require.NoError(t, validate(t, scram...))
}

// TestValidate_R_H9_ModeIsProductionUnlessDevelopmentIsSaid: production is
// the default, an unknown mode is refused, and the development
// configuration of `make run` says development: it is valid as it is and
// refused in production.
func TestValidate_R_H9_ModeIsProductionUnlessDevelopmentIsSaid(t *testing.T) {
	t.Parallel()
	cfg, _, err := loadConfig(nil)
	require.NoError(t, err)
	require.Equal(t, ModeProduction, cfg.Mode)
	require.ErrorContains(t, validate(t, "-mode=dev", "-target=control", "-control.auth-token="+goodToken), `mode "dev": want production or development`)

	_, file, _, _ := runtime.Caller(0)
	local := filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "local.yaml")
	require.NoError(t, validate(t, "-config.file="+local))
	err = validate(t, "-config.file="+local, "-mode=production")
	require.ErrorContains(t, err, "control.auth-token: the development token is refused")
	require.False(t, strings.Contains(err.Error(), "dev-token"), "the token is never printed")
}
