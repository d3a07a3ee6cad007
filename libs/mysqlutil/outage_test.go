package mysqlutil_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/testutil"
	"msgexchange/libs/testutil/faultproxy"
	"msgexchange/libs/testutil/mysqltest"
)

// TestOpen_R_M3_StartsDuringAnOutageFailsOnARefusal: a process started
// while the mailbox server cannot be reached (the path to it down) gets
// its pool, with a warning, and the pool works once the server answers —
// the dispatcher and ingest wait out the outage like one that began later
// instead of exiting into a crash loop. A server that answers with a
// refusal (wrong password) still fails the start, with the server's error.
func TestOpen_R_M3_StartsDuringAnOutageFailsOnARefusal(t *testing.T) {
	testutil.Integration(t)
	dsn := mysqltest.NewDatabase(t)
	host := regexp.MustCompile(`tcp\(([^)]+)\)`).FindStringSubmatch(dsn)
	require.Len(t, host, 2, dsn)
	p := faultproxy.New(t, "127.0.0.1:0", host[1])
	through := strings.Replace(dsn, host[1], p.Addr(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p.Down()
	var out testutil.LogBuffer
	db, err := mysqlutil.Open(ctx, mysqlutil.Config{DSN: through}, time.UTC, slog.New(slog.NewJSONHandler(&out, nil)))
	require.NoError(t, err, "an unreachable mailbox is an outage, not a reason to exit")
	defer db.Close()
	require.Contains(t, out.String(), "mailbox database unreachable at start")
	require.Error(t, db.PingContext(ctx), "still down")
	require.NoError(t, p.Up())
	require.Eventually(t, func() bool { return db.PingContext(ctx) == nil }, 30*time.Second, 50*time.Millisecond, "the pool answers once the server does")

	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.Passwd = "not-the-password"
	_, err = mysqlutil.Open(ctx, mysqlutil.Config{DSN: cfg.FormatDSN()}, time.UTC, nil)
	require.ErrorContains(t, err, "pinging mysql")
	require.True(t, mysqlutil.AccessRefused(err), "the server's refusal: %v", err)
}

// TestUnreachable_R_M3_OutagesNotRefusalsOrSettings: only a server that
// did not answer is an outage; its answer with an error, or a TLS
// certificate the client rejects, is not.
func TestUnreachable_R_M3_OutagesNotRefusalsOrSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{mysql.ErrInvalidConn, true},
		{fmt.Errorf("pinging: %w", io.EOF), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect: connection refused")}, true},
		{context.DeadlineExceeded, true},
		{&mysql.MySQLError{Number: 1045, Message: "Access denied"}, false},
		{&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout"}, false},
		{x509.UnknownAuthorityError{}, false},
		{fmt.Errorf("some other failure"), false},
		{nil, false},
	} {
		require.Equal(t, c.want, mysqlutil.Unreachable(c.err), "%v", c.err)
	}
}
