package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goodToken is 32 bytes, the shortest token production accepts;
// operatorToken another, for an operator's line.
const (
	goodToken     = "0123456789abcdef0123456789abcdef"
	operatorToken = "fedcba9876543210fedcba9876543210"
)

func validate(t *testing.T, args ...string) error {
	t.Helper()
	cfg, _, err := loadConfig(args)
	require.NoError(t, err)
	return cfg.Validate()
}

// writeFile writes content to a new file of the test and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// credentials are the flags of a production process with separate
// credentials: the control plane's token file (a service line and an
// operator line) and the service's own token file.
func credentials(t *testing.T) []string {
	t.Helper()
	return []string{
		"-control.token-file=" + writeFile(t, "processor:service=*:"+goodToken+"\nalice:operate:"+operatorToken+"\n"),
		"-lease.token-file=" + writeFile(t, goodToken+"\n"),
	}
}

// TestValidate_R_H9_ProductionRequiresSeparateCredentials: outside
// development mode services and operators hold different credentials: the
// control plane needs control.token-file (principal:role:token lines) and
// every lease-holding service lease.token-file (its own token); with both
// every target starts, and targets without a control plane or a lease need
// neither.
func TestValidate_R_H9_ProductionRequiresSeparateCredentials(t *testing.T) {
	t.Parallel()
	creds := credentials(t)
	for _, target := range []string{"control", "processor", "dispatcher", "ingest", "all", "control,processor"} {
		require.NoError(t, validate(t, append([]string{"-target=" + target}, creds...)...), target)
	}
	for _, target := range []string{"projector", "migrate"} {
		require.NoError(t, validate(t, "-target="+target), target)
	}

	leaseOnly := creds[1]
	err := validate(t, "-target=control")
	require.ErrorContains(t, err, "control.token-file: required outside development mode")
	require.NotContains(t, err.Error(), "lease.token-file", "the control plane holds no lease")
	err = validate(t, "-target=all", leaseOnly)
	require.ErrorContains(t, err, "control.token-file: required outside development mode")

	controlOnly := creds[0]
	for _, target := range []string{"processor", "dispatcher", "ingest", "all"} {
		err := validate(t, "-target="+target, controlOnly)
		require.ErrorContains(t, err, "lease.token-file: required outside development mode", target)
	}
	require.NoError(t, validate(t, "-mode=development", "-target=processor"))
	require.NoError(t, validate(t, "-mode=development", "-target=control", "-control.insecure-no-auth=true"))
}

// TestValidate_R_H9_ProductionRefusesTheAllRolesToken: control.auth-token,
// one token with every role, would let services and operators share a
// credential, so production refuses it on every target, however long and
// random; lease.auth-token (a token as a value, beside or instead of the
// file) is refused too. Development mode accepts both. The token is never
// part of the message.
func TestValidate_R_H9_ProductionRefusesTheAllRolesToken(t *testing.T) {
	t.Parallel()
	creds := credentials(t)
	for _, target := range []string{"control", "all", "processor", "projector"} {
		args := append([]string{"-target=" + target, "-control.auth-token=" + goodToken}, creds...)
		err := validate(t, args...)
		require.ErrorContains(t, err, "control.auth-token: refused outside development mode", target)
		require.NotContains(t, err.Error(), goodToken)
		require.NoError(t, validate(t, append(args, "-mode=development")...), target)
	}
	args := append([]string{"-target=processor", "-lease.auth-token=" + goodToken}, creds...)
	err := validate(t, args...)
	require.ErrorContains(t, err, "lease.auth-token: refused outside development mode: put this service's token in lease.token-file")
	require.NotContains(t, err.Error(), goodToken)
	require.NoError(t, validate(t, append(args, "-mode=development")...))
}

// TestValidate_R_H9_ProductionRefusesShortTokens: a token of either token
// file shorter than 32 bytes refuses to start, naming the file's line and
// never the token; 32 bytes start.
func TestValidate_R_H9_ProductionRefusesShortTokens(t *testing.T) {
	t.Parallel()
	short := goodToken[:31]
	creds := credentials(t)

	control := writeFile(t, "# services\nprocessor:service:"+goodToken+"\nalice:operate:"+short+"\n")
	err := validate(t, "-target=control", "-control.token-file="+control)
	require.ErrorContains(t, err, "control.token-file: token file "+control+": line 3: the token of alice is shorter than 32 bytes (31 bytes)")
	require.NotContains(t, err.Error(), short)

	lease := writeFile(t, short+"\n")
	err = validate(t, "-target=processor", "-lease.token-file="+lease)
	require.ErrorContains(t, err, "lease.token-file: control-plane token file "+lease+": line 1: the token is shorter than 32 bytes (31 bytes)")
	require.NotContains(t, err.Error(), short)

	require.NoError(t, validate(t, append([]string{"-target=all"}, creds...)...))
}

// TestValidate_R_H9_ProductionRefusesTheDevelopmentToken: the public
// development token is refused in a token file, the control plane's and
// the lease client's, with its line named, in every mode; as
// control.auth-token it is refused outside development mode and accepted
// in it (make run).
func TestValidate_R_H9_ProductionRefusesTheDevelopmentToken(t *testing.T) {
	t.Parallel()
	control := writeFile(t, "processor:service:"+goodToken+"\n\nops:operate:dev-token\n")
	lease := writeFile(t, "dev-token\n")
	for _, mode := range []string{ModeProduction, ModeDevelopment} {
		err := validate(t, "-mode="+mode, "-target=control", "-control.token-file="+control)
		require.ErrorContains(t, err, "line 3: the token of ops is the public development token", mode)
		err = validate(t, "-mode="+mode, "-target=ingest", "-lease.token-file="+lease)
		require.ErrorContains(t, err, "line 1: the public development token is refused", mode)
	}

	err := validate(t, append([]string{"-target=all", "-control.auth-token=dev-token"}, credentials(t)...)...)
	require.ErrorContains(t, err, "control.auth-token: refused outside development mode")
	require.NoError(t, validate(t, "-mode=development", "-target=all", "-control.auth-token=dev-token"))
}

// TestValidate_R_H9_ProductionRefusesAnUnauthenticatedControlPlane:
// control.insecure-no-auth starts only in development mode; run reports it
// as an invalid configuration before anything is connected.
func TestValidate_R_H9_ProductionRefusesAnUnauthenticatedControlPlane(t *testing.T) {
	t.Parallel()
	err := run([]string{"-target=control", "-control.insecure-no-auth=true"})
	require.ErrorContains(t, err, "invalid configuration")
	require.ErrorContains(t, err, "control.insecure-no-auth: refused outside development mode")

	// Even with proper credentials, the switch itself is refused.
	err = validate(t, append([]string{"-target=all", "-control.insecure-no-auth=true"}, credentials(t)...)...)
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
	require.ErrorContains(t, validate(t, sasl...), "kafka.sasl.mechanism PLAIN: refused outside development mode")
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
	require.ErrorContains(t, validate(t, "-mode=dev", "-target=control"), `mode "dev": want production or development`)

	_, file, _, _ := runtime.Caller(0)
	local := filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "local.yaml")
	require.NoError(t, validate(t, "-config.file="+local))
	err = validate(t, "-config.file="+local, "-mode=production")
	require.ErrorContains(t, err, "control.auth-token: refused outside development mode")
	require.ErrorContains(t, err, "control.token-file: required outside development mode")
	require.ErrorContains(t, err, "lease.token-file: required outside development mode")
	require.False(t, strings.Contains(err.Error(), "dev-token"), "the token is never printed")
}
