package interceptor

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"msgexchange/services/control/internal/caller"
)

// TestGuard_R_H9_PanicBecomesStableInternalError: a panicking handler
// answers Internal with the stable message; the panic value, the stack and
// the authenticated principal are in the log under the reference.
func TestGuard_R_H9_PanicBecomesStableInternalError(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	g := NewGuard(slog.New(slog.NewTextHandler(&logs, nil)))
	info := &grpc.UnaryServerInfo{FullMethod: "/msgx.control.v1.AdminService/GetMessage"}
	_, err := g.Unary()(context.Background(), nil, info, func(ctx context.Context, _ any) (any, error) {
		caller.With(ctx, caller.Caller{Principal: "alice", Peer: "10.0.0.1:5000"})
		var m map[string]int
		m["boom"]++ // a nil-map write: a real runtime panic
		return nil, nil
	})
	st := status.Convert(err)
	require.Equal(t, codes.Internal, st.Code())
	require.True(t, strings.HasPrefix(st.Message(), InternalMessage), st.Message())
	ref := strings.TrimPrefix(st.Message(), InternalMessage)
	require.Len(t, ref, 16)
	require.NotContains(t, st.Message(), "nil map")
	out := logs.String()
	require.Contains(t, out, "reference="+ref)
	require.Contains(t, out, "assignment to entry in nil map")
	require.Contains(t, out, "principal=alice")
	require.Contains(t, out, "guard_test.go", "the stack is logged")
}

// TestGuard_R_H9_InternalErrorsGetAStableMessage: Internal and non-status
// errors lose their detail to the log; every other code passes unchanged.
func TestGuard_R_H9_InternalErrorsGetAStableMessage(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	g := NewGuard(slog.New(slog.NewTextHandler(&logs, nil)))
	info := &grpc.UnaryServerInfo{FullMethod: "/msgx.control.v1.AdminService/GetFlight"}
	call := func(err error) error {
		_, got := g.Unary()(context.Background(), nil, info, func(context.Context, any) (any, error) { return nil, err })
		return got
	}
	for _, in := range []error{
		status.Error(codes.Internal, `reading flight: ERROR: relation "flight" does not exist (SQLSTATE 42P01)`),
		errors.New(`pq: column "secret" does not exist`),
		status.Error(codes.DataLoss, "page checksum mismatch"),
	} {
		st := status.Convert(call(in))
		require.Equal(t, codes.Internal, st.Code())
		require.True(t, strings.HasPrefix(st.Message(), InternalMessage), st.Message())
	}
	require.Contains(t, logs.String(), "SQLSTATE 42P01")
	require.Contains(t, logs.String(), `column \"secret\"`)

	notFound := status.Error(codes.NotFound, "message 9 not found")
	require.Equal(t, notFound, call(notFound))
	require.NoError(t, call(nil))
}
