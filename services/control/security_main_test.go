package control_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"msgexchange/libs/config"
	leaseapi "msgexchange/libs/lease"
	"msgexchange/services/control"
)

// The credentials of tokenFileLines: three service principals (the
// dispatcher's bound to its leases) and two operators.
var principalTokens = map[string]string{
	"processor":  "processor-token-0123456789abcdef012345",
	"dispatcher": "dispatcher-token-0123456789abcdef012345",
	"ingest":     "ingest-token-0123456789abcdef0123456789",
	"viewer":     "viewer-token-0123456789abcdef0123456789",
	"alice":      "alice-token-0123456789abcdef01234567890",
}

// tokenFileLines is the token file of withTokenFile.
func tokenFileLines() string {
	return "# control-plane credentials\n" +
		"processor:service:" + principalTokens["processor"] + "\n" +
		"ingest:service:" + principalTokens["ingest"] + "\n" +
		"dispatcher:service=dispatcher/*:" + principalTokens["dispatcher"] + "\n" +
		"viewer:read:" + principalTokens["viewer"] + "\n" +
		"alice:operate:" + principalTokens["alice"] + "\n"
}

// withTokenFile configures the bundle with a token file (and no fixed
// token) and returns the file's path.
func withTokenFile(t *testing.T, path *string) setupOpts {
	t.Helper()
	*path = filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(*path, []byte(tokenFileLines()), 0o600))
	p := *path
	return func(c *control.Config) {
		c.AuthToken = config.Secret("")
		c.TokenFile = p
	}
}

// as is a bounded context carrying principal's token.
func as(t *testing.T, principal string) context.Context {
	t.Helper()
	tok, ok := principalTokens[principal]
	if !ok {
		tok = principal // a raw token
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// leaseClient is a lease client of the bundle authenticated as principal.
func (b *testBundle) leaseClient(t *testing.T, principal string) *leaseapi.GRPCClient {
	t.Helper()
	c, err := leaseapi.Dial(b.svc.GRPCAddr(), principalTokens[principal])
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// plainCtx bounds a call made by a client that adds its own credential.
func plainCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// auditPrincipalPeer is the principal and peer of one audit row.
type auditPrincipalPeer struct {
	Principal string
	Peer      string
}

// principalPeer reads principal and peer of the rows of table (id order).
func (b *testBundle) principalPeer(t *testing.T, table string) []auditPrincipalPeer {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT principal, peer FROM `+table+` ORDER BY 1, 2`)
	require.NoError(t, err)
	defer rows.Close()
	var out []auditPrincipalPeer
	for rows.Next() {
		var r auditPrincipalPeer
		require.NoError(t, rows.Scan(&r.Principal, &r.Peer))
		require.True(t, strings.HasPrefix(r.Peer, "127.0.0.1:"), "peer %q of %s", r.Peer, table)
		r.Peer = "127.0.0.1"
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}
