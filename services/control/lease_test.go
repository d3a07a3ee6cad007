package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	leaseapi "msgexchange/libs/lease"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestLease_R_F1_R_F3_ServedAndGuarded: LeaseService is served by the
// control plane behind the same token check as every other call (R-F3);
// the lease client library dials it with the token and an Elector runs a
// function under a lease through it.
func TestLease_R_F1_R_F3_ServedAndGuarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewLeaseServiceClient(b.conn)
	noToken := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}

	t.Run("EveryMethodRefusesWithoutToken", func(t *testing.T) {
		t.Parallel()
		_, err := client.Acquire(noToken(t), &controlv1.AcquireLeaseRequest{Name: "processor", Holder: "h", Ttl: durationpb.New(time.Second)})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.Renew(noToken(t), &controlv1.RenewLeaseRequest{Name: "processor", Holder: "h", Token: 1, Ttl: durationpb.New(time.Second)})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.Release(noToken(t), &controlv1.ReleaseLeaseRequest{Name: "processor", Holder: "h", Token: 1})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.List(noToken(t), &controlv1.ListLeasesRequest{})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.ForceRelease(noToken(t), &controlv1.ForceReleaseLeaseRequest{Name: "processor", Operator: "o", Reason: "r"})
		requireCode(t, codes.Unauthenticated, err)
	})
	t.Run("LibraryWithWrongTokenIsRejected", func(t *testing.T) {
		t.Parallel()
		c, err := leaseapi.Dial(b.svc.GRPCAddr(), "wrong")
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Acquire(callCtx(t), "ingest-scanner", leaseapi.Holder(), time.Second)
		require.ErrorIs(t, err, leaseapi.ErrRejected)
	})
	t.Run("ElectorRunsUnderTheLease", func(t *testing.T) {
		t.Parallel()
		c, err := leaseapi.Dial(b.svc.GRPCAddr(), testToken)
		require.NoError(t, err)
		defer c.Close()
		el, err := leaseapi.NewElector(c, leaseapi.Options{TTL: time.Second, Retry: 50 * time.Millisecond, Logger: testLogger(t)})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		tokens := make(chan int64, 1)
		done := make(chan error, 1)
		go func() {
			done <- el.Run(ctx, "dispatcher/msg", leaseapi.Holder(), func(fctx context.Context, token int64) error {
				tokens <- token
				<-fctx.Done()
				return nil
			})
		}()
		select {
		case tok := <-tokens:
			require.Equal(t, int64(1), tok)
		case <-time.After(10 * time.Second):
			t.Fatal("elector never became active")
		}
		list, err := client.List(callCtx(t), &controlv1.ListLeasesRequest{})
		require.NoError(t, err)
		require.Len(t, list.GetLeases(), 1)
		require.True(t, list.GetLeases()[0].GetHeld())
		cancel()
		require.NoError(t, <-done)
		list, err = client.List(callCtx(t), &controlv1.ListLeasesRequest{})
		require.NoError(t, err)
		require.False(t, list.GetLeases()[0].GetHeld(), "a stopping elector releases its lease")
	})
}
