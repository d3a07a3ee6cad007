package pipeline

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// inTx runs fn in a transaction of the engine's lease terms: with an
// elector the lease check runs inside PostgreSQL as the last statement
// before COMMIT, so a processor that lost its lease (a paused zombie) can
// commit nothing (R-B8, CLM-6), and a refused check ends the term (R-H6).
// Without an elector (tests of the engine alone) there is no lease to
// check.
func (e *Engine) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return e.db.InTx(ctx, fn)
}

// exec runs one statement in a fenced transaction.
func (e *Engine) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return e.db.Exec(ctx, sql, args...)
}
