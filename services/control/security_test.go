package control_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"msgexchange/libs/config"
	leaseapi "msgexchange/libs/lease"
	"msgexchange/libs/testutil/tlstest"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control"
	"msgexchange/services/control/internal/interceptor"
)

// TestAuth_R_H9_ReadTokenRefusedOnReplayExecute: a read credential
// previews a replay but may not execute it (PERMISSION_DENIED, nothing
// recorded); an operate credential executes it.
func TestAuth_R_H9_ReadTokenRefusedOnReplayExecute(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	b.exec(t, `INSERT INTO proc_state (msg_id, state, error_class, reason, raw, kafka_offset, finished_at)
		VALUES (42, 'DEAD', 'CODEC_ERROR', 'bad STOT', '<MSG/>', 7, $1)`, testNow.Add(-time.Hour))
	client := controlv1.NewReplayServiceClient(b.conn)
	sel := &controlv1.ReplaySelector{MsgIds: []int64{42}}

	pre, err := client.Preview(as(t, "viewer"), &controlv1.PreviewReplayRequest{Selector: sel})
	require.NoError(t, err)
	require.Equal(t, int64(1), pre.GetReplayableCount())
	_, err = client.Execute(as(t, "viewer"), &controlv1.ExecuteReplayRequest{Selector: sel, Operator: "viewer", Reason: "try"})
	requireCode(t, codes.PermissionDenied, err)
	require.Contains(t, err.Error(), "principal viewer (role read)")
	require.Contains(t, err.Error(), "needs role operate")
	require.Empty(t, b.principalPeer(t, "replay_request"), "a refused execute records nothing")

	_, err = client.Execute(as(t, "processor"), &controlv1.ExecuteReplayRequest{Selector: sel, Operator: "svc", Reason: "try"})
	requireCode(t, codes.PermissionDenied, err)
	_, err = controlv1.NewAdminServiceClient(b.conn).GetBacklog(as(t, "processor"), &controlv1.GetBacklogRequest{})
	requireCode(t, codes.PermissionDenied, err)

	_, err = client.Execute(as(t, "alice"), &controlv1.ExecuteReplayRequest{Selector: sel, Operator: "alice", Reason: "codec fixed"})
	require.NoError(t, err)
	require.Equal(t, []auditPrincipalPeer{{"alice", "127.0.0.1"}}, b.principalPeer(t, "replay_request"))
}

// TestAudit_R_H9_RowsCarryPrincipalAndPeer: every audited repair records
// the principal of the credential — not the operator name the caller
// declared — and the peer address of the connection.
func TestAudit_R_H9_RowsCarryPrincipalAndPeer(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	b.exec(t, `INSERT INTO proc_state (msg_id, state, attempts, raw, received_at, kafka_offset, registered_at, updated_at)
	  VALUES (10, 'PENDING', 0, '<MSG/>', $1, 1, $1, $1)`, testNow.Add(-time.Hour))
	b.exec(t, `INSERT INTO outbox (id, target, pkey, payload, state, attempts, next_attempt_at, last_error, created_at)
	  VALUES (1000, 'msg', '15', 'p', 'DEAD', 10, $1, 'kafka: too large', $1)`, testNow.Add(-time.Hour))
	admin := controlv1.NewAdminServiceClient(b.conn)

	_, err := admin.RequeueOutbox(as(t, "alice"), &controlv1.RequeueOutboxRequest{Ids: []int64{1000}, Operator: "someone-else", Reason: "limit raised"})
	require.NoError(t, err)
	_, err = admin.EndMessage(as(t, "alice"), &controlv1.EndMessageRequest{MsgId: 10, Operator: "someone-else", Reason: "stuck"})
	require.NoError(t, err)
	_, err = admin.RebuildProjection(as(t, "alice"), &controlv1.RebuildProjectionRequest{Operator: "someone-else", Reason: "redis lost"})
	require.NoError(t, err)
	_, err = controlv1.NewRequestServiceClient(b.conn).SendRQRD(as(t, "alice"), &controlv1.SendRQRDRequest{Rtyp: "SLST", Operator: "someone-else", Reason: "refresh"})
	require.NoError(t, err)
	_, err = controlv1.NewLeaseServiceClient(b.conn).ForceRelease(as(t, "alice"), &controlv1.ForceReleaseLeaseRequest{Name: "nope", Operator: "x", Reason: "y"})
	requireCode(t, codes.NotFound, err)

	want := []auditPrincipalPeer{{"alice", "127.0.0.1"}}
	for _, table := range []string{"outbox_requeue_audit", "message_end_audit", "projection_rebuild", "req_track"} {
		require.Equal(t, want, b.principalPeer(t, table), table)
	}
}

// TestAuth_R_H9_TokenFileRotationWithoutRestart: a token added to the
// file is accepted and a removed one refused, by the running server —
// at once through ReloadCredentials, and by the server's own poll.
func TestAuth_R_H9_TokenFileRotationWithoutRestart(t *testing.T) {
	t.Parallel()
	var path string
	b := setup(t, withTokenFile(t, &path), func(c *control.Config) { c.TokenReloadInterval = 10 * time.Millisecond })
	admin := controlv1.NewAdminServiceClient(b.conn)
	const newToken = "alice-rotated-token-0123456789abcdef0123"
	call := func(tok string) error {
		_, err := admin.GetBacklog(as(t, tok), &controlv1.GetBacklogRequest{})
		return err
	}
	require.NoError(t, call("alice"))
	requireCode(t, codes.Unauthenticated, call(newToken))

	// Rotation, step 1: old and new token both valid.
	require.NoError(t, os.WriteFile(path, []byte(tokenFileLines()+"alice:operate:"+newToken+"\n"), 0o600))
	_, err := b.svc.ReloadCredentials()
	require.NoError(t, err)
	require.NoError(t, call(newToken))
	require.NoError(t, call("alice"))

	// Step 2: the old line removed; the server's poll picks it up.
	lines := strings.Replace(tokenFileLines(), "alice:operate:"+principalTokens["alice"]+"\n", "", 1)
	require.NoError(t, os.WriteFile(path, []byte(lines+"alice:operate:"+newToken+"\n"), 0o600))
	require.Eventually(t, func() bool { return status.Code(call("alice")) == codes.Unauthenticated }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, call(newToken))

	// A broken file keeps the tokens in force.
	require.NoError(t, os.WriteFile(path, []byte("alice:operate:short\n"), 0o600))
	_, err = b.svc.ReloadCredentials()
	require.ErrorContains(t, err, "shorter than")
	require.NoError(t, call(newToken))
}

// TestTLS_R_H9_ServerTLSAndMutualTLS: the control plane serves TLS; a
// client trusting its CA calls it, a plaintext client cannot; with a
// client CA configured only clients with a certificate of that CA get
// through, and the token is still required.
func TestTLS_R_H9_ServerTLSAndMutualTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "control-ca")
	server := ca.Server("control")
	client := ca.Client("msgxctl-alice")
	stranger := tlstest.NewCA(t, "other-ca").Client("mallory")

	dialTLS := func(t *testing.T, addr string, tc config.TLS) *grpc.ClientConn {
		t.Helper()
		cfg, err := leaseapi.ClientTLS(tc)
		require.NoError(t, err)
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	backlog := func(conn *grpc.ClientConn, ctx context.Context) error {
		_, err := controlv1.NewAdminServiceClient(conn).GetBacklog(ctx, &controlv1.GetBacklogRequest{})
		return err
	}

	t.Run("ServerTLS", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *control.Config) { c.TLS = control.ServerTLS{CertFile: server.CertFile, KeyFile: server.KeyFile} })
		conn := dialTLS(t, b.svc.GRPCAddr(), config.TLS{CAFile: ca.File})
		require.NoError(t, backlog(conn, callCtx(t)))
		requireCode(t, codes.Unauthenticated, backlog(conn, plainCtx(t)))
		requireCode(t, codes.Unavailable, backlog(b.conn, callCtx(t))) // a plaintext client gets no answer

		// The lease client dials the same way from its configuration.
		cl, err := (&leaseapi.Config{ControlAddr: b.svc.GRPCAddr(), TLS: config.TLS{CAFile: ca.File}}).Dial(testToken)
		require.NoError(t, err)
		defer cl.Close()
		_, err = cl.Acquire(plainCtx(t), "processor", "host-t/1/aa", time.Minute)
		require.NoError(t, err)
	})
	t.Run("MutualTLS", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *control.Config) {
			c.TLS = control.ServerTLS{CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: ca.File}
		})
		withCert := dialTLS(t, b.svc.GRPCAddr(), config.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile})
		require.NoError(t, backlog(withCert, callCtx(t)))
		requireCode(t, codes.Unauthenticated, backlog(withCert, plainCtx(t))) // mutual TLS does not replace the token

		noCert := dialTLS(t, b.svc.GRPCAddr(), config.TLS{CAFile: ca.File})
		requireCode(t, codes.Unavailable, backlog(noCert, callCtx(t)))
		foreign := dialTLS(t, b.svc.GRPCAddr(), config.TLS{CAFile: ca.File, CertFile: stranger.CertFile, KeyFile: stranger.KeyFile})
		requireCode(t, codes.Unavailable, backlog(foreign, callCtx(t)))
	})
}

// TestGuard_R_H9_InternalErrorOverTheWire: a database failure the
// handler reports as internal reaches the caller as the stable message
// with a reference, without SQL text.
func TestGuard_R_H9_InternalErrorOverTheWire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `ALTER TABLE flight RENAME TO flight_renamed_by_test`)
	_, err := controlv1.NewAdminServiceClient(b.conn).GetFlight(callCtx(t), &controlv1.GetFlightRequest{Flid: 15})
	requireCode(t, codes.Internal, err)
	msg := status.Convert(err).Message()
	require.True(t, strings.HasPrefix(msg, interceptor.InternalMessage), msg)
	require.NotContains(t, msg, "flight")
	require.NotContains(t, msg, "SQLSTATE")
}
