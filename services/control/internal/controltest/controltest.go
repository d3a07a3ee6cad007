package controltest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"msgexchange/migrations/migratetest"
)

// MigratedPool creates a new database with the pipeline's schema applied
// and returns its URL and a pool on it, closed when the test ends.
func MigratedPool(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	dbURL := migratetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return dbURL, pool
}

// Serve runs a gRPC server on 127.0.0.1:0 with the services that register
// adds, and returns a plaintext client connection to it. When the test
// ends the connection is closed, then the server is stopped (in-flight
// calls are cancelled) and must have served without error.
func Serve(t testing.TB, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(ServeWith(t, nil, register), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// ServeWith runs a gRPC server with opts (interceptors, credentials) on
// 127.0.0.1:0 with the services that register adds, and returns its
// address. When the test ends the server is stopped (in-flight calls are
// cancelled) and must have served without error.
func ServeWith(t testing.TB, opts []grpc.ServerOption, register func(*grpc.Server)) string {
	t.Helper()
	srv := grpc.NewServer(opts...)
	register(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		require.NoError(t, <-served)
	})
	return ln.Addr().String()
}
