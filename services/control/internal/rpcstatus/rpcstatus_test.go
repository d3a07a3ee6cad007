package rpcstatus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"msgexchange/libs/logging"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestQueryError_R_F1_R_H9_MapsFailuresToCodes: timeouts and
// cancellations keep their codes, SQL errors and contract mismatches are
// INTERNAL, anything else is UNAVAILABLE (retryable); the message names the
// operation and never carries the database's own text.
func TestQueryError_R_F1_R_H9_MapsFailuresToCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
		msg  string
	}{
		{"Deadline", fmt.Errorf("querying: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "reading flight: the database did not answer in time"},
		{"Canceled", context.Canceled, codes.Canceled, "reading flight: cancelled"},
		{"SQLError", fmt.Errorf("scanning: %w", &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: `relation "flight" does not exist`}), codes.Internal, "reading flight failed"},
		{"ContractMismatch", fmt.Errorf("mapping state: %w", ErrContractMismatch), codes.Internal, "reading flight failed"},
		{"Unreachable", errors.New("dial tcp 10.0.0.5:5432: connection refused"), codes.Unavailable, "reading flight: postgres unavailable; retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := status.Convert(QueryError(logging.Discard(), "reading flight", tc.err, "flid", 15))
			require.Equal(t, tc.code, st.Code())
			require.Equal(t, tc.msg, st.Message())
		})
	}
}

// TestPositiveID_RejectsZeroAndNegative: only a positive ID passes; the
// message names the field, the value and what is expected.
func TestPositiveID_RejectsZeroAndNegative(t *testing.T) {
	t.Parallel()
	require.NoError(t, PositiveID("flid", 1, "FLID"))
	for _, id := range []int64{0, -3} {
		st := status.Convert(PositiveID("flid", id, "FLID"))
		require.Equal(t, codes.InvalidArgument, st.Code())
		require.Equal(t, fmt.Sprintf("flid %d: must be a positive FLID", id), st.Message())
	}
}

// TestRowError_R_F1_AbsenceIsNotFoundFailureIsQueryError: a missing row is
// NOT_FOUND naming the thing, its ID and what absence can mean; a
// failure is QueryError's; no error stays none.
func TestRowError_R_F1_AbsenceIsNotFoundFailureIsQueryError(t *testing.T) {
	t.Parallel()
	log := logging.Discard()
	require.NoError(t, RowError(log, nil, "message", "msg_id", 7, ""))

	st := status.Convert(RowError(log, fmt.Errorf("scanning: %w", pgx.ErrNoRows), "message", "msg_id", 7, "never registered"))
	require.Equal(t, codes.NotFound, st.Code())
	require.Equal(t, "message 7 not found: never registered", st.Message())
	st = status.Convert(RowError(log, pgx.ErrNoRows, "maintenance request", "id", 3, ""))
	require.Equal(t, "maintenance request 3 not found", st.Message())

	st = status.Convert(RowError(log, errors.New("dial tcp: connection refused"), "flight", "flid", 15, ""))
	require.Equal(t, codes.Unavailable, st.Code())
	require.Equal(t, "reading flight: postgres unavailable; retry", st.Message())
}
