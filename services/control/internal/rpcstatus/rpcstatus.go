package rpcstatus

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrContractMismatch marks a database value that the protobuf contract
// cannot express (for example a state added to the schema but not to the
// enum): a deployment bug, reported as codes.Internal by QueryError.
var ErrContractMismatch = errors.New("database value unknown to the control-plane contract; update proto/msgx/control/v1")

// QueryError turns a database failure of operation op into a gRPC status: a
// timeout stays a timeout, SQL errors and contract mismatches are internal
// (logged at error level with attrs), anything else means PostgreSQL cannot
// be reached and the call may be retried (logged at warning level). The
// status carries a stable message naming op only: SQL text, schema names
// and database addresses stay in the log (R-H9).
func QueryError(logger *slog.Logger, op string, err error, attrs ...any) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: the database did not answer in time", op)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: cancelled", op)
	case errors.As(err, &pgErr), errors.Is(err, ErrContractMismatch):
		logger.Error(op+" failed", append(attrs, "err", err)...)
		return status.Errorf(codes.Internal, "%s failed", op)
	default:
		logger.Warn(op+" failed", append(attrs, "err", err)...)
		return status.Errorf(codes.Unavailable, "%s: postgres unavailable; retry", op)
	}
}

// PositiveID returns nil when id is positive, else an INVALID_ARGUMENT
// status "<field> <id>: must be a positive <what>".
func PositiveID(field string, id int64, what string) error {
	if id > 0 {
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "%s %d: must be a positive %s", field, id, what)
}

// RowError maps the outcome of reading the one row of a thing by its ID
// (logged under key): nil stays nil, no row is NotFound ("<thing> <id> not
// found", with why appended when given: what absence can mean), anything
// else is QueryError's "reading <thing>". The RPCs that return one row by
// ID all answer absence and failure alike through it.
func RowError(logger *slog.Logger, err error, thing, key string, id int64, why string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		if why != "" {
			return status.Errorf(codes.NotFound, "%s %d not found: %s", thing, id, why)
		}
		return status.Errorf(codes.NotFound, "%s %d not found", thing, id)
	default:
		return QueryError(logger, "reading "+thing, err, key, id)
	}
}
