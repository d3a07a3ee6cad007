package interceptor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"msgexchange/libs/logging"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAuth_R_F3_Check covers the token check without a server; the
// control package tests the same over a real connection.
func TestAuth_R_F3_Check(t *testing.T) {
	t.Parallel()
	incoming := func(vals ...string) context.Context {
		md := metadata.MD{}
		for _, v := range vals {
			md.Append(AuthorizationKey, v)
		}
		return metadata.NewIncomingContext(context.Background(), md)
	}
	tests := []struct {
		name    string
		token   string
		ctx     context.Context
		method  string
		wantErr string
	}{
		{name: "RightToken", token: "t0k", ctx: incoming("Bearer t0k"), method: "/msgx.control.v1.AdminService/GetBacklog"},
		{name: "SurroundingSpaces", token: "t0k", ctx: incoming("  Bearer   t0k "), method: "/msgx.control.v1.AdminService/GetBacklog"},
		{name: "NoMetadata", token: "t0k", ctx: context.Background(), method: "/msgx.control.v1.AdminService/GetBacklog", wantErr: "missing authorization"},
		{name: "WrongToken", token: "t0k", ctx: incoming("Bearer t0K"), method: "/msgx.control.v1.AdminService/GetBacklog", wantErr: "invalid token"},
		{name: "EmptyConfiguredTokenDisablesAuth", token: "", ctx: context.Background(), method: "/msgx.control.v1.AdminService/GetBacklog"},
		{name: "HealthExempt", token: "t0k", ctx: context.Background(), method: "/grpc.health.v1.Health/Check"},
		{name: "HealthWatchExempt", token: "t0k", ctx: context.Background(), method: "/grpc.health.v1.Health/Watch"},
		{name: "ReflectionExempt", token: "t0k", ctx: context.Background(), method: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"},
		{name: "ReflectionAlphaExempt", token: "t0k", ctx: context.Background(), method: "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"},
		{name: "LookalikeNotExempt", token: "t0k", ctx: context.Background(), method: "/grpc.health.v1.HealthX/Check", wantErr: "missing authorization"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := NewAuth(tc.token, logging.Discard()).check(tc.ctx, tc.method)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, codes.Unauthenticated, status.Code(err))
			require.Contains(t, err.Error(), tc.wantErr)
		})
	}
}
