package lease

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// grantingServer grants every acquisition.
type grantingServer struct {
	controlv1.UnimplementedLeaseServiceServer
}

func (grantingServer) Acquire(context.Context, *controlv1.AcquireLeaseRequest) (*controlv1.AcquireLeaseResponse, error) {
	return &controlv1.AcquireLeaseResponse{Token: 1, ExpiresAt: timestamppb.New(time.Now().Add(time.Minute))}, nil
}

// serveGrants serves grantingServer on addr until the returned stop.
func serveGrants(t *testing.T, addr string) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := grpc.NewServer()
	controlv1.RegisterLeaseServiceServer(srv, grantingServer{})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { srv.Stop(); <-done }
}

// TestGRPCClient_R_M2_ReconnectsWithinSecondsAfterALongOutage: after the
// control plane was unreachable for 30 s, a lease client's next call
// succeeds within ReconnectMaxDelay (+ slack) of the control plane
// listening again. gRPC's default backoff had grown to about 26 s by then,
// so that a holder waited, idle, for up to that long with the control
// plane back.
func TestGRPCClient_R_M2_ReconnectsWithinSecondsAfterALongOutage(t *testing.T) {
	t.Parallel()
	addr, stop := serveGrants(t, "127.0.0.1:0")
	c, err := Dial(addr, "")
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Acquire(ctx, "processor", "host-a/1/aa", 10*time.Second)
		return err
	}
	require.NoError(t, call())

	stop()
	// The outage lasts 30 s: long enough for gRPC's default backoff to grow.
	require.Never(t, func() bool { return call() == nil }, 30*time.Second, 200*time.Millisecond, "the control plane is down")
	_, stop = serveGrants(t, addr)
	defer stop()
	back := time.Now()
	require.Eventually(t, func() bool { return call() == nil }, ReconnectMaxDelay+3*time.Second, 50*time.Millisecond,
		"no successful call within the reconnect delay of the control plane's return")
	t.Logf("first call through %s after the control plane listened again", time.Since(back).Round(time.Millisecond))
}
