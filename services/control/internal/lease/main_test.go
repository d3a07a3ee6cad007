package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	leaseapi "msgexchange/libs/lease"
	"msgexchange/libs/testutil"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/controltest"
	"msgexchange/services/control/internal/interceptor"
	"msgexchange/services/control/internal/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a migrated database and a real LeaseService on 127.0.0.1:0 behind
// the control plane's authentication, with the principals of
// serviceTokens and the all-roles token of api.
type env struct {
	dbURL string
	pool  *pgxpool.Pool
	addr  string
	api   controlv1.LeaseServiceClient
}

// allRolesToken is the fixed token (principal interceptor.FixedPrincipal,
// every role) of env.api and env.client.
const allRolesToken = "lease-tests-all-roles-token"

// serviceTokens are the service principals of every env's token file.
var serviceTokens = map[string]string{
	"processor": "processor-token-0123456789abcdef0123456789",
	"ingest":    "ingest-token-0123456789abcdef0123456789abc",
}

// operatorToken is the token of principal "alice", role operate.
const operatorToken = "alice-operate-token-0123456789abcdef0123"

// newEnv starts the service with the given lock timeout (0: the default).
func newEnv(t *testing.T, lockTimeout time.Duration) *env {
	t.Helper()
	if lockTimeout == 0 {
		lockTimeout = lease.DefaultLockTimeout
	}
	dbURL, pool := controltest.MigratedPool(t)
	lines := "alice:operate:" + operatorToken + "\n"
	for p, tok := range serviceTokens {
		lines += p + ":service:" + tok + "\n"
	}
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o600))
	creds, err := interceptor.NewCredentials(path, allRolesToken)
	require.NoError(t, err)
	logger := testLogger(t)
	auth := interceptor.NewAuth(creds, logger)
	addr := controltest.ServeWith(t, []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(interceptor.NewGuard(logger).Unary(), auth.Unary()),
	}, func(srv *grpc.Server) {
		controlv1.RegisterLeaseServiceServer(srv, lease.NewServer(pool, logger, 10*time.Second, lockTimeout))
	})
	conn, err := grpc.NewClient(addr, leaseapi.DialOptions(allRolesToken)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &env{dbURL: dbURL, pool: pool, addr: addr, api: controlv1.NewLeaseServiceClient(conn)}
}

// client returns a lease client with the all-roles token and its own
// connection, closed when the test ends.
func (e *env) client(t *testing.T) *leaseapi.GRPCClient {
	t.Helper()
	return e.clientWith(t, allRolesToken)
}

// clientAs returns a lease client authenticated as a service principal.
func (e *env) clientAs(t *testing.T, principal string) *leaseapi.GRPCClient {
	t.Helper()
	tok, ok := serviceTokens[principal]
	require.True(t, ok, "no service principal %s", principal)
	return e.clientWith(t, tok)
}

func (e *env) clientWith(t *testing.T, token string) *leaseapi.GRPCClient {
	t.Helper()
	c, err := leaseapi.Dial(e.addr, token)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// auditRow is one lease_audit row without id and time.
type auditRow struct {
	Action, Holder   string
	Token            int64
	Operator, Reason string
}

// audits returns the audit of name in ID order.
func (e *env) audits(t *testing.T, name string) []auditRow {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT action, holder, token, COALESCE(operator, ''), COALESCE(reason, '') FROM lease_audit WHERE name=$1 ORDER BY id`, name)
	require.NoError(t, err)
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		require.NoError(t, rows.Scan(&r.Action, &r.Holder, &r.Token, &r.Operator, &r.Reason))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// actions lists the audit's action/holder/token without reasons.
func actions(rows []auditRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Action+" "+r.Holder+" "+itoa(r.Token))
	}
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// callCtx bounds one call.
func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ttl(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func requireCode(t *testing.T, want codes.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want.String(), status.Code(err).String(), err.Error())
}

// acquireEventually polls Acquire until it succeeds.
func acquireEventually(t *testing.T, c leaseapi.Client, name, holder string, d time.Duration) leaseapi.Grant {
	t.Helper()
	var g leaseapi.Grant
	require.Eventually(t, func() bool {
		var err error
		g, err = c.Acquire(callCtx(t), name, holder, d)
		return err == nil
	}, 15*time.Second, 10*time.Millisecond, "lease %s never acquired by %s", name, holder)
	return g
}

// testLogger writes to the test's log while the test runs.
func testLogger(t *testing.T) *slog.Logger { return testutil.Logger(t, slog.LevelDebug) }

var errKilled = errors.New("process killed")
