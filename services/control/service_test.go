package control_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"msgexchange/libs/lifecycle"
	"msgexchange/libs/logging"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control"
)

// TestAuth_R_F3_RefusesUnauthenticatedCalls: the control plane requires a
// token and refuses calls without the right one; only health and
// reflection are open.
func TestAuth_R_F3_RefusesUnauthenticatedCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	bounded := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}

	refused := []struct {
		name  string
		authz []string // authorization values; none = header absent
		want  string
	}{
		{name: "NoToken", want: "missing authorization"},
		{name: "WrongToken", authz: []string{"Bearer not-the-token"}, want: "invalid token"},
		{name: "TokenPrefix", authz: []string{"Bearer " + testToken[:5]}, want: "invalid token"},
		{name: "TokenWithSuffix", authz: []string{"Bearer " + testToken + "x"}, want: "invalid token"},
		{name: "WrongScheme", authz: []string{"Basic " + testToken}, want: "not a Bearer token"},
		{name: "BareToken", authz: []string{testToken}, want: "not a Bearer token"},
		{name: "EmptyBearer", authz: []string{"Bearer "}, want: "not a Bearer token"},
		{name: "TwoValues", authz: []string{"Bearer " + testToken, "Bearer other"}, want: "more than one"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := bounded(t)
			for _, v := range tc.authz {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", v)
			}
			_, err := client.GetBacklog(ctx, &controlv1.GetBacklogRequest{})
			requireCode(t, codes.Unauthenticated, err)
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "not-the-token", "the presented token is never echoed")
		})
	}

	t.Run("EveryAdminMethodIsGuarded", func(t *testing.T) {
		t.Parallel()
		ctx := bounded(t)
		_, err := client.GetMessage(ctx, &controlv1.GetMessageRequest{MsgId: 1})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.GetFlight(ctx, &controlv1.GetFlightRequest{Flid: 1})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.ListOutbox(ctx, &controlv1.ListOutboxRequest{})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.ListMessages(ctx, &controlv1.ListMessagesRequest{})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.EndMessage(ctx, &controlv1.EndMessageRequest{MsgId: 1, Operator: "mallory", Reason: "x"})
		requireCode(t, codes.Unauthenticated, err)
	})
	t.Run("RightTokenAccepted", func(t *testing.T) {
		t.Parallel()
		_, err := client.GetBacklog(callCtx(t), &controlv1.GetBacklogRequest{})
		require.NoError(t, err)
	})
	t.Run("SchemeIsCaseInsensitive", func(t *testing.T) {
		t.Parallel()
		ctx := metadata.AppendToOutgoingContext(bounded(t), "authorization", "bearer "+testToken)
		_, err := client.GetBacklog(ctx, &controlv1.GetBacklogRequest{})
		require.NoError(t, err)
	})
	t.Run("HealthNeedsNoToken", func(t *testing.T) {
		t.Parallel()
		resp, err := healthpb.NewHealthClient(b.conn).Check(bounded(t), &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	})
	t.Run("ReflectionNeedsNoToken", func(t *testing.T) {
		t.Parallel()
		stream, err := reflectionpb.NewServerReflectionClient(b.conn).ServerReflectionInfo(bounded(t))
		require.NoError(t, err)
		require.NoError(t, stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
		}))
		resp, err := stream.Recv()
		require.NoError(t, err)
		require.NoError(t, stream.CloseSend())
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		require.Contains(t, names, "msgx.control.v1.AdminService")
		require.Contains(t, names, "grpc.health.v1.Health")
	})
}

// TestAuth_InsecureNoAuthAcceptsEveryCall: the development escape hatch.
func TestAuth_InsecureNoAuthAcceptsEveryCall(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *control.Config) {
		c.AuthToken = ""
		c.InsecureNoAuth = true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := controlv1.NewAdminServiceClient(b.conn).GetBacklog(ctx, &controlv1.GetBacklogRequest{})
	require.NoError(t, err)
}

// TestHealth_ReportsPostgresReachability: SERVING for the server and for
// AdminService while PostgreSQL answers; NOT_SERVING once it stops
// answering (here: the pool is closed), and Ready says why.
func TestHealth_ReportsPostgresReachability(t *testing.T) {
	t.Parallel()
	b := setup(t)
	health := healthpb.NewHealthClient(b.conn)
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		require.NoError(t, err)
		return resp.GetStatus()
	}
	services := []string{"", "msgx.control.v1.AdminService"}
	for _, s := range services {
		require.Eventually(t, func() bool {
			return check(s) == healthpb.HealthCheckResponse_SERVING
		}, 10*time.Second, 10*time.Millisecond, "service %q", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, b.svc.Ready(ctx))

	b.pool.Close()
	for _, s := range services {
		require.Eventually(t, func() bool {
			return check(s) == healthpb.HealthCheckResponse_NOT_SERVING
		}, 10*time.Second, 10*time.Millisecond, "service %q", s)
	}
	require.ErrorContains(t, b.svc.Ready(ctx), "pinging postgres")

	// Calls now fail as retryable, not as internal errors.
	_, err := controlv1.NewAdminServiceClient(b.conn).GetBacklog(callCtx(t), &controlv1.GetBacklogRequest{})
	requireCode(t, codes.Unavailable, err)
}

// TestService_BusyPortFailsStart: the listener opens in Starting, so a
// taken port fails the start instead of a later run.
func TestService_BusyPortFailsStart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	b := setup(t) // a pool to hand over; its own server is irrelevant here
	cfg := testConfig()
	cfg.GRPCAddr = ln.Addr().String()
	svc, err := control.New(cfg, control.Deps{Logger: logging.Discard(), Postgres: b.pool})
	require.NoError(t, err)
	err = lifecycle.NewManager(logging.Discard(), svc.Services()...).Run(context.Background())
	require.ErrorContains(t, err, "listening on "+ln.Addr().String())
	require.Empty(t, svc.GRPCAddr())
}

// TestService_R_F7_StopEndsCallsAndListener: after a stop the port is
// closed and the health service no longer answers SERVING.
//
// Validation 001§6 and 002§8 "stub 误配置、重复实例、停机中断".
func TestService_R_F7_StopEndsCallsAndListener(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := testConfig()
	svc, err := control.New(cfg, control.Deps{Logger: logging.Discard(), Postgres: b.pool})
	require.NoError(t, err)
	m := lifecycle.NewManager(logging.Discard(), svc.Services()...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	require.Eventually(t, func() bool { return m.Ready() == nil }, 10*time.Second, 5*time.Millisecond)
	addr := svc.GRPCAddr()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	_, err = controlv1.NewAdminServiceClient(conn).GetBacklog(callCtx(t), &controlv1.GetBacklogRequest{})
	require.NoError(t, err)

	cancel()
	require.NoError(t, <-done)
	_, err = net.DialTimeout("tcp", addr, time.Second)
	require.Error(t, err, "listener still open after stop")
}
