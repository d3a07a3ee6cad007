package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestRequests_R_F1_R_F3_ServedAndGuarded: RequestService is served by the
// control plane behind the same token check as every other call (R-F3), and
// a send through gRPC registers a request.
func TestRequests_R_F1_R_F3_ServedAndGuarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewRequestServiceClient(b.conn)
	noToken := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}

	t.Run("EveryMethodRefusesWithoutToken", func(t *testing.T) {
		t.Parallel()
		_, err := client.SendRQFD(noToken(t), &controlv1.SendRQFDRequest{Stdb: "a", Stde: "b", Operator: "o", Reason: "r"})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.SendRQRD(noToken(t), &controlv1.SendRQRDRequest{Rtyp: "GLST", Operator: "o", Reason: "r"})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.ListRequests(noToken(t), &controlv1.ListRequestsRequest{})
		requireCode(t, codes.Unauthenticated, err)
	})
	t.Run("SendAndListWithToken", func(t *testing.T) {
		t.Parallel()
		sent, err := client.SendRQRD(callCtx(t), &controlv1.SendRQRDRequest{Rtyp: "SLST", Operator: "alice", Reason: "stands refresh"})
		require.NoError(t, err)
		r := sent.GetRequest()
		require.Equal(t, controlv1.RequestState_REQUEST_STATE_REGISTERED, r.GetState())
		require.Contains(t, r.GetXml(), "<RQRD><RTYP>SLST</RTYP></RQRD>")
		// DTTM is the fake clock's reading in the configured airport zone.
		require.Contains(t, r.GetXml(), "<DTTM>20260301200000</DTTM>")
		list, err := client.ListRequests(callCtx(t), &controlv1.ListRequestsRequest{State: controlv1.RequestState_REQUEST_STATE_REGISTERED})
		require.NoError(t, err)
		require.NotEmpty(t, list.GetRequests())
	})
	t.Run("InvalidArgument", func(t *testing.T) {
		t.Parallel()
		_, err := client.SendRQFD(callCtx(t), &controlv1.SendRQFDRequest{Operator: "o", Reason: "r"})
		requireCode(t, codes.InvalidArgument, err)
	})
}
