package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// FencedSQLState is the SQLSTATE that msgx_fence raises when a token is not
// current ("MX001", class MX is msgexchange's own).
const FencedSQLState = "MX001"

// Fence checks, inside tx, that token is the current fencing token of the
// live lease name, by calling the database function msgx_fence. Call it as
// the LAST statement before committing tx: the check share-locks the lease
// row until the transaction ends, so no takeover can commit between the
// check and the commit. It returns an error wrapping ErrFenced when the
// token is stale, the lease expired or no such lease exists; tx is then
// aborted and must be rolled back. Other errors are the database's.
//
// Run fenced transactions at READ COMMITTED (the default): at REPEATABLE
// READ the lease row's own renewals make the lock fail with a serialization
// error.
func Fence(ctx context.Context, tx pgx.Tx, name string, token int64) error {
	return fence(ctx, tx, name, token)
}

// fenceSQL is the fencing check of lease $1 at token $2.
const fenceSQL = `SELECT msgx_fence($1, $2)`

// fence runs msgx_fence on q: inside a transaction (Fence, Term.InTx) or
// as a statement of its own (Term.Check). It is the one place every
// PostgreSQL fencing check of the package goes through.
func fence(ctx context.Context, q execer, name string, token int64) error {
	if _, err := q.Exec(ctx, fenceSQL, name, token); err != nil {
		return fenceError(name, token, err)
	}
	return nil
}

// fenceError wraps a msgx_fence failure with ErrFenced.
func fenceError(name string, token int64, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == FencedSQLState {
		return fmt.Errorf("checking lease %s token %d: %w: %w", name, token, ErrFenced, err)
	}
	return fmt.Errorf("checking lease %s token %d: %w", name, token, err)
}

// Beginner starts transactions: *pgxpool.Pool, *pgx.Conn and pgx.Tx (a
// savepoint) all are.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// InFencedTx runs fn in a transaction of db, then calls Fence and commits.
// fn's error rolls the transaction back and is returned as is. A fencing
// refusal returns an error wrapping ErrFenced; a commit that fails (for
// example because PostgreSQL ended a session left idle in the transaction)
// returns that error: in both cases nothing of fn's work is committed.
// A loop that writes more than once per term should use Writer.Term
// instead, which also ends the term at the first refusal.
func InFencedTx(ctx context.Context, db Beginner, name string, token int64, fn func(pgx.Tx) error) error {
	return inTx(ctx, db, fn, &fenceOf{name: name, token: token}, nil)
}
