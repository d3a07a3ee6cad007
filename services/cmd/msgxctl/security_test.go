package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/config"
	"msgexchange/libs/testutil/tlstest"
	"msgexchange/services/control"
)

// TestMsgxctl_R_H9_TLSClientCertificateAndTokenFile: against a control
// plane with mutual TLS and a token file, msgxctl connects with -ca,
// -cert, -key and -token-file; without the client certificate or
// trusting another CA it fails; a read token lists but may not execute a
// replay.
func TestMsgxctl_R_H9_TLSClientCertificateAndTokenFile(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "control-ca")
	server := ca.Server("control")
	client := ca.Client("alice")
	other := tlstest.NewCA(t, "other-ca")
	dir := t.TempDir()
	const (
		operateToken = "alice-operate-token-0123456789abcdef0123"
		readToken    = "viewer-read-token-0123456789abcdef012345"
	)
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("alice:operate:"+operateToken+"\nviewer:read:"+readToken+"\n"), 0o600))
	aliceFile, viewerFile := filepath.Join(dir, "alice"), filepath.Join(dir, "viewer")
	require.NoError(t, os.WriteFile(aliceFile, []byte(operateToken+"\n"), 0o600))
	require.NoError(t, os.WriteFile(viewerFile, []byte(readToken+"\n"), 0o600))

	b := setup(t, func(c *control.Config) {
		c.AuthToken = config.Secret("")
		c.TokenFile = tokens
		c.TLS = control.ServerTLS{CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: ca.File}
	})
	env := map[string]string{envAddr: b.addr}
	tlsArgs := []string{"-ca", ca.File, "-cert", client.CertFile, "-key", client.KeyFile}

	r := b.runEnv(t, env, append(tlsArgs, "-token-file", aliceFile, "backlog")...)
	require.Equal(t, 0, r.code, r.stderr)

	r = b.runEnv(t, env, "-ca", ca.File, "-token-file", aliceFile, "backlog")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "unavailable", "mutual TLS refuses a client without a certificate")

	r = b.runEnv(t, env, "-ca", other.File, "-cert", client.CertFile, "-key", client.KeyFile, "-token-file", aliceFile, "backlog")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "certificate")

	r = b.runEnv(t, env, "-token-file", aliceFile, "backlog")
	require.Equal(t, 1, r.code, "plaintext against a TLS control plane")

	r = b.runEnv(t, map[string]string{envAddr: b.addr, envCA: ca.File, envCert: client.CertFile, envKey: client.KeyFile, envTokenFile: viewerFile}, "backlog")
	require.Equal(t, 0, r.code, r.stderr)
	r = b.runEnv(t, map[string]string{envAddr: b.addr, envCA: ca.File, envCert: client.CertFile, envKey: client.KeyFile, envTokenFile: viewerFile},
		"replay", "execute", "42", "--operator", "viewer", "--reason", "try")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "msgxctl: permission denied: principal viewer (role read)")
	require.NotContains(t, r.stderr, readToken)

	r = b.runEnv(t, env, append(tlsArgs, "-token-file", filepath.Join(dir, "missing"), "backlog")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "check --token-file")
}
