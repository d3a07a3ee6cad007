package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	leaseapi "msgexchange/libs/lease"
)

// TestMsgxctl_R_F1_R_F2_Lease: "lease list" shows every lease with holder,
// token and expiry, "lease force-release" ends a term with operator and
// reason, both as tables and -json (R-F1 "Lease", R-F2).
func TestMsgxctl_R_F1_R_F2_Lease(t *testing.T) {
	t.Parallel()
	b := setup(t)

	r := b.run(t, "lease", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no leases: no instance has acquired one yet\n", r.stdout)

	c, err := leaseapi.Dial(b.addr, testToken)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := c.Acquire(ctx, "processor", "host-a/41/0a0b0c0d", time.Hour)
	require.NoError(t, err)
	_, err = c.Acquire(ctx, "dispatcher/msg", "host-b/42/01020304", time.Hour)
	require.NoError(t, err)

	r = b.run(t, "lease", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^NAME\s+STATE\s+HOLDER\s+TOKEN\s+EXPIRES_AT\s+REMAINING\s+ACQUIRED_AT\s+RENEWED_AT\s*$`, r.stdout)
	expires := local(g.ExpiresAt.Truncate(time.Second))
	require.Regexp(t, `(?m)^dispatcher/msg\s+held\s+host-b/42/01020304\s+1\s+`, r.stdout)
	require.Regexp(t, `(?m)^processor\s+held\s+host-a/41/0a0b0c0d\s+1\s+`+quoteAll([]string{expires})[0]+`\s+59m59(\.\d)?s\s+`, r.stdout)

	r = b.run(t, "lease", "force-release", "processor")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "missing --operator, --reason")
	r = b.run(t, "lease", "force-release", "--operator", "alice", "--reason", "x")
	require.Equal(t, 2, r.code)
	r = b.run(t, "lease", "force-release", "nope", "--operator", "alice", "--reason", "x")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found: lease nope not found")

	r = b.run(t, "lease", "force-release", "processor", "--operator", "alice", "--reason", "host-a hangs")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^lease processor force-released: term of host-a/41/0a0b0c0d \(token 1\) ended; the next acquirer gets a new token \(audit \d+\)\n$`, r.stdout)
	r = b.run(t, "lease", "force-release", "processor", "--operator", "alice", "--reason", "again")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "lease processor was not held (last holder host-a/41/0a0b0c0d, token 1); recorded anyway")

	r = b.run(t, "lease", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^processor\s+released\s+host-a/41/0a0b0c0d\s+1\s+\S+\s+0s\s+`, r.stdout)

	r = b.run(t, "-json", "lease", "list")
	require.Equal(t, 0, r.code, r.stderr)
	leases := decodeJSON(t, r.stdout)["leases"].([]any)
	require.Len(t, leases, 2)
	p := leases[1].(map[string]any)
	require.Equal(t, "processor", p["name"])
	require.Equal(t, float64(1), p["token"])
	require.Equal(t, false, p["held"])
	require.Equal(t, "0s", p["remaining"])

	r = b.run(t, "-json", "lease", "force-release", "dispatcher/msg", "--operator", "bob", "--reason", "move it")
	require.Equal(t, 0, r.code, r.stderr)
	v := decodeJSON(t, r.stdout)
	require.Equal(t, true, v["was_held"])
	au := v["audit"].(map[string]any)
	require.Equal(t, "LEASE_ACTION_FORCE_RELEASE", au["action"])
	require.Equal(t, "bob", au["operator"])
	require.Equal(t, "move it", au["reason"])
}
