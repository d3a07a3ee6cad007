package lease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	leaseapi "msgexchange/libs/lease"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// principalRow is one lease_audit row with who made it.
type principalRow struct {
	Action, Holder, Principal string
	LoopbackPeer              bool
}

// principalAudits returns the audit of name with principal and peer.
func (e *env) principalAudits(t *testing.T, name string) []principalRow {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT action, holder, principal, peer FROM lease_audit WHERE name=$1 ORDER BY id`, name)
	require.NoError(t, err)
	defer rows.Close()
	var out []principalRow
	for rows.Next() {
		var (
			r    principalRow
			peer string
		)
		require.NoError(t, rows.Scan(&r.Action, &r.Holder, &r.Principal, &peer))
		r.LoopbackPeer = strings.HasPrefix(peer, "127.0.0.1:")
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// operatorAPI is the LeaseService as principal alice (role operate).
func (e *env) operatorAPI(t *testing.T) controlv1.LeaseServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(e.addr, leaseapi.DialOptions(operatorToken)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return controlv1.NewLeaseServiceClient(conn)
}

// TestLease_R_H9_TermBoundToThePrincipalThatAcquiredIt: another service
// principal naming the holder gets neither the token nor the lease —
// Acquire, Renew and Release are PERMISSION_DENIED and audited with its
// principal and peer — and the holder keeps its term.
func TestLease_R_H9_TermBoundToThePrincipalThatAcquiredIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	owner, intruder := e.clientAs(t, "processor"), e.clientAs(t, "ingest")
	const name, holder = "processor", "host-p/1/aa"
	g, err := owner.Acquire(callCtx(t), name, holder, time.Minute)
	require.NoError(t, err)

	_, err = intruder.Acquire(callCtx(t), name, holder, time.Minute)
	require.ErrorIs(t, err, leaseapi.ErrRejected)
	require.ErrorContains(t, err, "PermissionDenied")
	require.NotContains(t, err.Error(), "token 1")
	_, err = intruder.Renew(callCtx(t), name, holder, g.Token, time.Minute)
	require.ErrorIs(t, err, leaseapi.ErrRejected)
	require.ErrorContains(t, err, "PermissionDenied")
	released, err := intruder.Release(callCtx(t), name, holder, g.Token)
	require.ErrorIs(t, err, leaseapi.ErrRejected)
	require.ErrorContains(t, err, "PermissionDenied")
	require.False(t, released)

	// Under its own holder name the intruder is only told the lease is
	// held, without the token.
	_, err = e.api.Acquire(callCtx(t), &controlv1.AcquireLeaseRequest{Name: name, Holder: "host-i/2/bb", Ttl: ttl(time.Minute)})
	requireCode(t, codes.FailedPrecondition, err)
	require.NotContains(t, errorInfo(t, err).GetMetadata(), "token")

	renewed, err := owner.Acquire(callCtx(t), name, holder, time.Minute)
	require.NoError(t, err, "the owner re-acquires its own live term")
	require.Equal(t, g.Token, renewed.Token)
	require.True(t, renewed.Renewed)
	_, err = owner.Renew(callCtx(t), name, holder, g.Token, time.Minute)
	require.NoError(t, err)

	ok, err := owner.Release(callCtx(t), name, holder, g.Token)
	require.NoError(t, err)
	require.True(t, ok)

	require.Equal(t, []principalRow{
		{Action: "acquire", Holder: holder, Principal: "processor", LoopbackPeer: true},
		{Action: "denied", Holder: holder, Principal: "ingest", LoopbackPeer: true},
		{Action: "denied", Holder: holder, Principal: "ingest", LoopbackPeer: true},
		{Action: "denied", Holder: holder, Principal: "ingest", LoopbackPeer: true},
		{Action: "release", Holder: holder, Principal: "processor", LoopbackPeer: true},
	}, e.principalAudits(t, name))

	// After the release the lease is free: the other principal starts a
	// new term with a new token, never the old one.
	next, err := intruder.Acquire(callCtx(t), name, holder, time.Minute)
	require.NoError(t, err)
	require.Equal(t, g.Token+1, next.Token)
}

// TestLease_R_H9_OperatorsNeverGetALiveToken: an operator may not take a
// term (the term methods need role service), sees live terms without
// their token, sees an ended term's token, and its force-release is
// audited with its principal and peer.
func TestLease_R_H9_OperatorsNeverGetALiveToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	op := e.operatorAPI(t)
	owner := e.clientAs(t, "processor")
	g, err := owner.Acquire(callCtx(t), "dispatcher/msg", "host-d/1/aa", time.Minute)
	require.NoError(t, err)

	_, err = op.Acquire(callCtx(t), &controlv1.AcquireLeaseRequest{Name: "dispatcher/msg", Holder: "host-d/1/aa", Ttl: ttl(time.Minute)})
	requireCode(t, codes.PermissionDenied, err)
	require.Contains(t, err.Error(), "needs role service")

	list, err := op.List(callCtx(t), &controlv1.ListLeasesRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetLeases(), 1)
	require.True(t, list.GetLeases()[0].GetHeld())
	require.Equal(t, "host-d/1/aa", list.GetLeases()[0].GetHolder())
	require.Zero(t, list.GetLeases()[0].GetToken(), "the live token is not listed")

	fr, err := op.ForceRelease(callCtx(t), &controlv1.ForceReleaseLeaseRequest{Name: "dispatcher/msg", Operator: "alice", Reason: "stuck host"})
	require.NoError(t, err)
	require.Equal(t, g.Token, fr.GetLease().GetToken(), "an ended term's token is history")
	list, err = op.List(callCtx(t), &controlv1.ListLeasesRequest{})
	require.NoError(t, err)
	require.Equal(t, g.Token, list.GetLeases()[0].GetToken())

	require.Equal(t, []principalRow{
		{Action: "acquire", Holder: "host-d/1/aa", Principal: "processor", LoopbackPeer: true},
		{Action: "force-release", Holder: "host-d/1/aa", Principal: "alice", LoopbackPeer: true},
	}, e.principalAudits(t, "dispatcher/msg"))
}

// TestLease_R_H9_UnboundTermIsBoundByItsFirstRenewal: a term begun before
// terms were bound to principals (principal NULL after the migration) is
// renewed by its holder and from then on belongs to that principal.
func TestLease_R_H9_UnboundTermIsBoundByItsFirstRenewal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	g, err := e.clientAs(t, "processor").Acquire(callCtx(t), "processor", "host-p/1/aa", time.Minute)
	require.NoError(t, err)
	_, err = e.pool.Exec(context.Background(), `UPDATE lease SET principal = NULL WHERE name = 'processor'`)
	require.NoError(t, err)

	_, err = e.clientAs(t, "processor").Renew(callCtx(t), "processor", "host-p/1/aa", g.Token, time.Minute)
	require.NoError(t, err)
	var bound string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT principal FROM lease WHERE name = 'processor'`).Scan(&bound))
	require.Equal(t, "processor", bound)
	_, err = e.clientAs(t, "ingest").Renew(callCtx(t), "processor", "host-p/1/aa", g.Token, time.Minute)
	require.ErrorIs(t, err, leaseapi.ErrRejected)
}
