package pipeline

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/services/processor/internal/decide"
)

// ErrNotOpen means a state transition found the message already finished;
// terminal states are final (INV-6).
var ErrNotOpen = errors.New("message is not open")

// ErrMasterCycle means refreshing code-share masters did not settle: the
// MAID references form a cycle longer than any real code-share chain. Fix
// the MAID values of the flights involved.
var ErrMasterCycle = decide.ErrMasterCycle

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func classAttr(c string) metric.AddOption {
	return metric.WithAttributes(attribute.String("class", c))
}

func stateAttr(s string) metric.AddOption {
	return metric.WithAttributes(attribute.String("state", s))
}

func topicAttr(t string) metric.AddOption {
	return metric.WithAttributes(attribute.String("topic", t))
}

// failure is a retryable outcome of an execution.
type failure struct {
	class, reason string
}

func (f *failure) Error() string { return f.class + ": " + f.reason }
