package caller

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRoles_R_H9_OperateIncludesRead: operate grants read too; service
// grants neither; the set prints as the token file names its roles.
func TestRoles_R_H9_OperateIncludesRead(t *testing.T) {
	t.Parallel()
	op, ok := ParseRole("operate")
	require.True(t, ok)
	require.True(t, op.Has(Read))
	require.True(t, op.Has(Operate))
	require.False(t, op.Has(Service))
	require.Equal(t, "read,operate", op.String())

	svc, _ := ParseRole("service")
	require.False(t, svc.Has(Read))
	require.Equal(t, "service", svc.String())

	_, ok = ParseRole("admin")
	require.False(t, ok)
	require.False(t, AllRoles.Has(Role("admin")))
	require.Equal(t, "service,read,operate", AllRoles.String())
}

// TestTrack_SeesTheCallerAttachedFurtherDown: an interceptor running
// before authentication learns the caller attached after it; without
// one it gets the connection's peer.
func TestTrack_SeesTheCallerAttachedFurtherDown(t *testing.T) {
	t.Parallel()
	base := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4000}})
	ctx, who := Track(base)
	require.Equal(t, Caller{Peer: "10.1.2.3:4000"}, who())
	inner := With(ctx, Caller{Principal: "alice", Roles: AllRoles, Peer: "10.1.2.3:4000"})
	require.Equal(t, "alice", who().Principal)
	require.Equal(t, "alice", From(inner).Principal)
	require.Empty(t, From(context.Background()).Peer)
}
