package control_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"msgexchange/libs/clock"
	"msgexchange/libs/config"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/pgtest"
	"msgexchange/services/control"
	"msgexchange/services/control/internal/controltest"
)

func TestMain(m *testing.M) {
	if dbURL := os.Getenv(childDBEnv); dbURL != "" {
		os.Exit(serveChild(dbURL))
	}
	goleak.VerifyTestMain(m)
}

// testToken is the control plane's token in every test bundle.
const testToken = "s3cret-token-for-tests"

// testNow is the fake clock's reading in every test bundle.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testBundle is one running control plane on a fresh, migrated database,
// with a gRPC client connected to it.
type testBundle struct {
	dbURL string
	pool  *pgxpool.Pool
	svc   *control.Service
	conn  *grpc.ClientConn
	clock *clock.Fake
}

// setupOpts adjusts a bundle's configuration.
type setupOpts func(*control.Config)

// setup starts a control plane on 127.0.0.1:0 against a new database and
// registers everything for cleanup, in reverse order of creation.
func setup(t *testing.T, opts ...setupOpts) *testBundle {
	t.Helper()
	dbURL, pool := controltest.MigratedPool(t)

	cfg := testConfig()
	for _, o := range opts {
		o(&cfg)
	}
	fake := clock.NewFake(testNow)
	svc, err := control.New(cfg, control.Deps{Logger: testLogger(t), Clock: fake, Postgres: pool})
	require.NoError(t, err)
	startService(t, svc)

	conn, err := grpc.NewClient(svc.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &testBundle{dbURL: dbURL, pool: pool, svc: svc, conn: conn, clock: fake}
}

// testConfig is the flag defaults with a test token and a port chosen by
// the kernel.
func testConfig() control.Config {
	var cfg control.Config
	cfg.RegisterFlags("control.", flagSet())
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.AuthToken = config.Secret(testToken)
	cfg.HealthCheckInterval = 20 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

// startService runs every lifecycle service of svc until the test ends.
func startService(t *testing.T, svc *control.Service) {
	t.Helper()
	m := lifecycle.NewManager(testLogger(t), svc.Services()...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool { return m.Ready() == nil }, 10*time.Second, 5*time.Millisecond, "control plane did not start")
}

// authed returns ctx carrying the test token.
func authed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+testToken)
}

// callCtx is a bounded, authenticated context for one call.
func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return authed(ctx)
}

// exec runs SQL on the bundle's database.
func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	pgtest.MustExec(t, b.dbURL, sql, args...)
}

// requireProtoEqual compares protobuf messages and prints both on mismatch.
func requireProtoEqual(t *testing.T, want, got proto.Message) {
	t.Helper()
	if !proto.Equal(want, got) {
		t.Fatalf("protobuf mismatch\nwant: %s\n got: %s", prototext.Format(want), prototext.Format(got))
	}
}

// testLogger writes to the test's log while the test runs, at debug level
// so that failures show the calls made.
func testLogger(t *testing.T) *slog.Logger { return testutil.Logger(t, slog.LevelDebug) }
