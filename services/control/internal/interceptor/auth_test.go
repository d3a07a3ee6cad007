package interceptor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"msgexchange/libs/logging"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/caller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Tokens of the test token file, each at least MinTokenLength long.
var (
	svcToken     = strings.Repeat("s", 32)
	readerToken  = strings.Repeat("r", 32)
	operateToken = strings.Repeat("o", 32)
)

// writeTokens writes a token file into the test's directory.
func writeTokens(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func incoming(vals ...string) context.Context {
	md := metadata.MD{}
	for _, v := range vals {
		md.Append(AuthorizationKey, v)
	}
	return metadata.NewIncomingContext(context.Background(), md)
}

// TestAuth_R_F3_Check covers the token check without a server; the
// control package tests the same over a real connection.
func TestAuth_R_F3_Check(t *testing.T) {
	t.Parallel()
	creds, err := NewCredentials("", "t0k")
	require.NoError(t, err)
	const method = "/msgx.control.v1.AdminService/GetBacklog"
	tests := []struct {
		name    string
		creds   *Credentials
		ctx     context.Context
		method  string
		wantErr string
	}{
		{name: "RightToken", creds: creds, ctx: incoming("Bearer t0k"), method: method},
		{name: "SurroundingSpaces", creds: creds, ctx: incoming("  Bearer   t0k "), method: method},
		{name: "NoMetadata", creds: creds, ctx: context.Background(), method: method, wantErr: "missing authorization"},
		{name: "WrongToken", creds: creds, ctx: incoming("Bearer t0K"), method: method, wantErr: "invalid token"},
		{name: "NoCredentialsDisablesAuth", ctx: context.Background(), method: method},
		{name: "HealthExempt", creds: creds, ctx: context.Background(), method: "/grpc.health.v1.Health/Check"},
		{name: "HealthWatchExempt", creds: creds, ctx: context.Background(), method: "/grpc.health.v1.Health/Watch"},
		{name: "ReflectionExempt", creds: creds, ctx: context.Background(), method: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"},
		{name: "ReflectionAlphaExempt", creds: creds, ctx: context.Background(), method: "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"},
		{name: "LookalikeNotExempt", creds: creds, ctx: context.Background(), method: "/grpc.health.v1.HealthX/Check", wantErr: "missing authorization"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			md, _ := metadata.FromIncomingContext(tc.ctx)
			_, err := NewAuth(tc.creds, logging.Discard()).check(tc.ctx, tc.method, md)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, codes.Unauthenticated, status.Code(err))
			require.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// TestAuth_R_H9_RolesDecide: the service credential reaches only the
// lease term methods, read every Get/List/preview, operate the repairs as
// well; the caller handed to the handler names the principal, never the
// token.
func TestAuth_R_H9_RolesDecide(t *testing.T) {
	t.Parallel()
	creds, err := NewCredentials(writeTokens(t, "processor:service:"+svcToken+"\nviewer:read:"+readerToken+"\nalice:operate:"+operateToken+"\n"), "")
	require.NoError(t, err)
	a := NewAuth(creds, logging.Discard())
	allowed := map[string][]string{
		svcToken:     {controlv1.LeaseService_Acquire_FullMethodName, controlv1.LeaseService_Renew_FullMethodName, controlv1.LeaseService_Release_FullMethodName},
		readerToken:  {controlv1.LeaseService_List_FullMethodName, controlv1.AdminService_GetMessage_FullMethodName, controlv1.ReplayService_Preview_FullMethodName, controlv1.RequestService_ListRequests_FullMethodName},
		operateToken: {controlv1.LeaseService_List_FullMethodName, controlv1.ReplayService_Preview_FullMethodName, controlv1.ReplayService_Execute_FullMethodName, controlv1.LeaseService_ForceRelease_FullMethodName, controlv1.AdminService_EndMessage_FullMethodName, controlv1.AdminService_RequeueOutbox_FullMethodName, controlv1.AdminService_RebuildProjection_FullMethodName, controlv1.RequestService_SendRQFD_FullMethodName},
	}
	principals := map[string]string{svcToken: "processor", readerToken: "viewer", operateToken: "alice"}
	// The lists pin the decisions independently of the table: each listed
	// method passes; across the whole table, a method passes exactly when
	// the credential has the method's role.
	for token, methods := range allowed {
		for _, method := range methods {
			ctx, err := checkCtx(a, incoming("Bearer "+token), method)
			require.NoError(t, err, "%s %s", principals[token], method)
			require.Equal(t, principals[token], caller.From(ctx).Principal)
		}
		for method, need := range methodRoles {
			_, err := checkCtx(a, incoming("Bearer "+token), method)
			if rolesOf(token).Has(need) {
				require.NoError(t, err, "%s %s", principals[token], method)
				continue
			}
			require.Equal(t, codes.PermissionDenied, status.Code(err), "%s %s", principals[token], method)
			require.Contains(t, err.Error(), "needs role "+string(need))
		}
	}
	for _, m := range []string{controlv1.LeaseService_Acquire_FullMethodName, controlv1.LeaseService_Renew_FullMethodName, controlv1.LeaseService_Release_FullMethodName} {
		_, err := checkCtx(a, incoming("Bearer "+operateToken), m)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "operators never take a lease term: %s", m)
	}
	_, err = checkCtx(a, incoming("Bearer "+svcToken), controlv1.LeaseService_List_FullMethodName)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "the service credential calls only the term methods")
	_, err = checkCtx(a, incoming("Bearer "+operateToken), "/msgx.control.v1.AdminService/Unlisted")
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	require.Contains(t, err.Error(), "no role grants it")
}

func rolesOf(token string) caller.Roles {
	name := map[string]string{svcToken: "service", readerToken: "read", operateToken: "operate"}[token]
	r, _ := caller.ParseRole(name)
	return r
}

// TestRoles_R_H9_EveryServedMethodHasARole: every method of the six
// control services has an entry, so that none is closed by accident, and
// every entry names a served method.
func TestRoles_R_H9_EveryServedMethodHasARole(t *testing.T) {
	t.Parallel()
	served := map[string]bool{}
	for _, sd := range []struct {
		name    string
		methods []string
	}{
		{controlv1.AdminService_ServiceDesc.ServiceName, methodNames(controlv1.AdminService_ServiceDesc.Methods)},
		{controlv1.LeaseService_ServiceDesc.ServiceName, methodNames(controlv1.LeaseService_ServiceDesc.Methods)},
		{controlv1.ReplayService_ServiceDesc.ServiceName, methodNames(controlv1.ReplayService_ServiceDesc.Methods)},
		{controlv1.RequestService_ServiceDesc.ServiceName, methodNames(controlv1.RequestService_ServiceDesc.Methods)},
		{controlv1.InspectService_ServiceDesc.ServiceName, methodNames(controlv1.InspectService_ServiceDesc.Methods)},
		{controlv1.MaintenanceService_ServiceDesc.ServiceName, methodNames(controlv1.MaintenanceService_ServiceDesc.Methods)},
	} {
		for _, m := range sd.methods {
			full := "/" + sd.name + "/" + m
			served[full] = true
			_, ok := RequiredRole(full)
			require.True(t, ok, "%s has no role", full)
		}
	}
	for m := range methodRoles {
		require.True(t, served[m], "%s is not served", m)
	}
}

func methodNames(ms []grpc.MethodDesc) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.MethodName)
	}
	return out
}

// checkCtx runs a's check on the metadata of ctx, as the interceptors do.
func checkCtx(a *Auth, ctx context.Context, method string) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return a.check(ctx, method, md)
}
