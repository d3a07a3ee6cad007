package control_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	leaseapi "msgexchange/libs/lease"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestLease_R_H9_TakeoverWithListedHolderRefused is the reported takeover:
// a caller reads the holder from the lease list, calls Acquire with that
// holder's name and must get neither the live token nor the lease; a
// release with the token is refused too; the victim keeps its term; and
// the audit names the caller, with its peer, never the victim.
func TestLease_R_H9_TakeoverWithListedHolderRefused(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	victim := b.leaseClient(t, "processor")
	g, err := victim.Acquire(plainCtx(t), "processor", "host-v/1/aa", time.Minute)
	require.NoError(t, err)

	api := controlv1.NewLeaseServiceClient(b.conn)
	list, err := api.List(as(t, "alice"), &controlv1.ListLeasesRequest{})
	require.NoError(t, err)
	holder := list.GetLeases()[0].GetHolder()
	require.Equal(t, "host-v/1/aa", holder)
	require.NotEqual(t, g.Token, list.GetLeases()[0].GetToken(), "the list reveals the live token")

	// An operator credential, and another service's credential.
	for _, intruder := range []struct {
		principal string
		want      string
	}{
		{"alice", "needs role service"},
		{"ingest", "acquired by another principal"},
	} {
		resp, err := api.Acquire(as(t, intruder.principal), &controlv1.AcquireLeaseRequest{Name: "processor", Holder: holder, Ttl: durationpb.New(time.Minute)})
		require.Error(t, err, "Acquire with the holder's name returned token %d", resp.GetToken())
		requireCode(t, codes.PermissionDenied, err)
		require.Contains(t, err.Error(), intruder.want)
		rel, err := api.Release(as(t, intruder.principal), &controlv1.ReleaseLeaseRequest{Name: "processor", Holder: holder, Token: g.Token})
		require.False(t, rel.GetReleased())
		requireCode(t, codes.PermissionDenied, err)
		_, err = api.Renew(as(t, intruder.principal), &controlv1.RenewLeaseRequest{Name: "processor", Holder: holder, Token: g.Token, Ttl: durationpb.New(time.Minute)})
		requireCode(t, codes.PermissionDenied, err)
	}
	_, err = victim.Renew(plainCtx(t), "processor", "host-v/1/aa", g.Token, time.Minute)
	require.NoError(t, err, "the victim keeps its term")

	// The operator was stopped by its role before the lease service; the
	// other service's attempts are in the lease audit under its own name.
	require.Equal(t, []auditPrincipalPeer{
		{"ingest", "127.0.0.1"}, {"ingest", "127.0.0.1"}, {"ingest", "127.0.0.1"}, {"processor", "127.0.0.1"},
	}, b.principalPeer(t, "lease_audit"))
	var denied int
	require.NoError(t, b.pool.QueryRow(plainCtx(t), `SELECT count(*) FROM lease_audit WHERE action = 'denied' AND principal = 'ingest'`).Scan(&denied))
	require.Equal(t, 3, denied)
	_, err = b.leaseClient(t, "ingest").Acquire(plainCtx(t), "processor", "host-i/2/bb", time.Minute)
	require.ErrorIs(t, err, leaseapi.ErrHeld)
	require.NotContains(t, err.Error(), "token")
}

// TestLease_R_K7_CredentialBoundToItsLeaseNames: the token file binds the
// dispatcher's credential to the leases "dispatcher/*"; with it, Acquire,
// Renew and Release of the processor's lease are PERMISSION_DENIED and
// audited as denied under the dispatcher's principal (before, the
// dispatcher's token took lease processor for an hour), while its own
// leases work.
func TestLease_R_K7_CredentialBoundToItsLeaseNames(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	dispatcher := b.leaseClient(t, "dispatcher")

	g, err := dispatcher.Acquire(plainCtx(t), "dispatcher/msg", "host-d/1/aa", time.Minute)
	require.NoError(t, err)
	_, err = dispatcher.Renew(plainCtx(t), "dispatcher/msg", "host-d/1/aa", g.Token, time.Minute)
	require.NoError(t, err)

	api := controlv1.NewLeaseServiceClient(b.conn)
	resp, err := api.Acquire(as(t, "dispatcher"), &controlv1.AcquireLeaseRequest{Name: "processor", Holder: "host-d/1/aa", Ttl: durationpb.New(time.Hour)})
	require.Error(t, err, "the dispatcher's credential took lease processor with token %d", resp.GetToken())
	requireCode(t, codes.PermissionDenied, err)
	require.Contains(t, err.Error(), "principal dispatcher may hold only dispatcher/*")
	_, err = api.Renew(as(t, "dispatcher"), &controlv1.RenewLeaseRequest{Name: "processor", Holder: "host-d/1/aa", Token: 1, Ttl: durationpb.New(time.Hour)})
	requireCode(t, codes.PermissionDenied, err)
	_, err = api.Release(as(t, "dispatcher"), &controlv1.ReleaseLeaseRequest{Name: "processor", Holder: "host-d/1/aa", Token: 1})
	requireCode(t, codes.PermissionDenied, err)
	_, err = api.Acquire(as(t, "dispatcher"), &controlv1.AcquireLeaseRequest{Name: "dispatcherX", Holder: "h", Ttl: durationpb.New(time.Minute)})
	requireCode(t, codes.PermissionDenied, err)

	var denied, held int
	require.NoError(t, b.pool.QueryRow(plainCtx(t), `SELECT count(*) FROM lease_audit
		WHERE action = 'denied' AND principal = 'dispatcher' AND name IN ('processor', 'dispatcherX')`).Scan(&denied))
	require.Equal(t, 4, denied, "every refused call is audited")
	require.NoError(t, b.pool.QueryRow(plainCtx(t), `SELECT count(*) FROM lease WHERE name = 'processor'`).Scan(&held))
	require.Zero(t, held, "the processor's lease was never created")

	// An unbound service line (a token file of before the binding) still
	// holds any lease.
	_, err = b.leaseClient(t, "ingest").Acquire(plainCtx(t), "ingest-scanner", "host-i/1/aa", time.Minute)
	require.NoError(t, err)
}
