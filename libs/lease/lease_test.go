package lease

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestHolder_UniquePerCallAndNamesHostAndPID(t *testing.T) {
	t.Parallel()
	a, b := Holder(), Holder()
	require.NotEqual(t, a, b)
	parts := strings.Split(a, "/")
	require.Len(t, parts, 3)
	host, _ := os.Hostname()
	require.Equal(t, host, parts[0])
	require.Equal(t, strconv.Itoa(os.Getpid()), parts[1])
	require.Len(t, parts[2], 8)
}

// TestCallError_MapsStatuses: FAILED_PRECONDITION with the LeaseService
// ErrorInfo becomes ErrHeld / ErrLost naming the current holder; calls
// that cannot succeed become ErrRejected; the rest stays transient.
func TestCallError_MapsStatuses(t *testing.T) {
	t.Parallel()
	withInfo := func(reason string) error {
		st, err := status.New(codes.FailedPrecondition, "lease processor is held").WithDetails(&errdetails.ErrorInfo{
			Domain: ErrorDomain, Reason: reason, Metadata: map[string]string{"holder": "host-b/7/ab", "token": "5", "expires_at": "2026-03-01T12:00:10Z"}})
		require.NoError(t, err)
		return st.Err()
	}
	for _, tc := range []struct {
		name         string
		err, fallbak error
		want         error
		contains     string
	}{
		{"Held", withInfo(ReasonHeld), ErrLost, ErrHeld, "holder host-b/7/ab token 5"},
		{"Lost", withInfo(ReasonLost), ErrHeld, ErrLost, "until 2026-03-01T12:00:10Z"},
		{"PreconditionWithoutInfo", status.Error(codes.FailedPrecondition, "x"), ErrLost, ErrLost, "x"},
		{"Unauthenticated", status.Error(codes.Unauthenticated, "missing authorization"), ErrHeld, ErrRejected, "missing authorization"},
		{"InvalidArgument", status.Error(codes.InvalidArgument, "ttl"), ErrHeld, ErrRejected, "ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := callError("op", tc.err, tc.fallbak)
			require.ErrorIs(t, got, tc.want)
			require.ErrorContains(t, got, tc.contains)
		})
	}
	for _, transient := range []error{status.Error(codes.Unavailable, "down"), status.Error(codes.Aborted, "locked"), errors.New("eof")} {
		got := callError("op", transient, ErrHeld)
		require.False(t, errors.Is(got, ErrHeld) || errors.Is(got, ErrLost) || errors.Is(got, ErrRejected), got.Error())
	}
}

// TestFenceError_MapsSQLState: only SQLSTATE MX001 is ErrFenced.
func TestFenceError_MapsSQLState(t *testing.T) {
	t.Parallel()
	fenced := fenceError("processor", 3, &pgconn.PgError{Code: FencedSQLState, Message: "fenced: stale"})
	require.ErrorIs(t, fenced, ErrFenced)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, fenced, &pgErr)
	other := fenceError("processor", 3, &pgconn.PgError{Code: "57P01"})
	require.NotErrorIs(t, other, ErrFenced)
}

func TestDialOptions_CarryBearerToken(t *testing.T) {
	t.Parallel()
	require.Len(t, DialOptions(""), 2, "transport and reconnection")
	require.Len(t, DialOptions("t"), 3, "and the token")
	md, err := bearer{token: "s3cret"}.GetRequestMetadata(context.Background())
	require.NoError(t, err)
	require.Equal(t, "Bearer s3cret", md["authorization"])
	c, err := Dial("127.0.0.1:1", "t")
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

func TestConfig_DefaultsAndValidate(t *testing.T) {
	t.Parallel()
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags("processor.lease.", fs)
	require.NoError(t, c.Validate("processor.lease."))
	require.Equal(t, 10*time.Second, c.TTL)
	require.Equal(t, 2*time.Second, c.Retry)
	o := c.Options(nil)
	require.Equal(t, c.TTL, o.TTL)

	require.NoError(t, fs.Parse([]string{"-processor.lease.control-addr=", "-processor.lease.ttl=100ms", "-processor.lease.retry=0s"}))
	err := c.Validate("processor.lease.")
	require.ErrorContains(t, err, "processor.lease.control-addr: required")
	require.ErrorContains(t, err, "processor.lease.ttl 100ms")
	require.ErrorContains(t, err, "processor.lease.retry 0s")
}
