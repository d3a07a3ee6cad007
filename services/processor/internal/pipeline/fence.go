package pipeline

import (
	"context"
	"fmt"

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

// jobApplicationName names the daily job's transactions (record cleanup,
// history sweep, history purge) in pg_stat_activity, and so among a waiting
// statement's blockers (pg_blocking_pids): an operator, or the R-M5 bench,
// tells a statement waiting on the job from one waiting on the pipeline.
// The session's own name comes back when the transaction ends.
const jobApplicationName = "msgx processor: daily job"

// jobTx runs fn in a fenced transaction named as the daily job's.
func (e *Engine) jobTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return e.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('application_name', $1, true)`, jobApplicationName); err != nil {
			return fmt.Errorf("naming the daily job's transaction: %w", err)
		}
		return fn(tx)
	})
}

// jobExec runs one statement of the daily job in its own jobTx.
func (e *Engine) jobExec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := e.jobTx(ctx, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}
