package pipeline

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
)

// LeaseName is the processor's lease: one active processor at a time
// (R-B8, PRE-5).
const LeaseName = "processor"

// Elector runs fn while this instance holds a lease (libs/lease.Elector).
type Elector interface {
	Run(ctx context.Context, name, holder string, fn func(ctx context.Context, token int64) error) error
}

// inTx runs fn in a transaction of the engine's fenced DB: with an elector
// the lease check runs inside PostgreSQL as the last statement before
// COMMIT, so a processor that lost its lease (a paused zombie) can commit
// nothing (R-B8, CLM-6), and a refused check ends the term (R-H6). Without
// an elector (tests of the engine alone) there is no lease to check.
func (e *Engine) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return e.db.InTx(ctx, fn)
}

// exec runs one statement in a fenced transaction.
func (e *Engine) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// Services returns the processor's lifecycle services. With an elector it
// is one service that waits as standby until it holds the processor lease
// and then runs every loop for as long as the term lasts; each term starts
// the loops afresh, so positions are read from PostgreSQL after the lease is
// won (the previous holder may have moved them).
//
// A term ends when the elector loses the lease, and also at once when any
// transaction of the term is refused by the fence (R-H6): the refusal
// cancels the term's context, so every loop stops before it can repeat
// anything under the old token, and the elector goes back to standby and
// tries to acquire again.
func (e *Engine) Services() []*lifecycle.Service {
	if e.opt.Elector == nil {
		return e.loops()
	}
	holder := e.opt.Holder
	if holder == "" {
		holder = lease.Holder()
	}
	return []*lifecycle.Service{lifecycle.NewService("processor-leader", nil, func(ctx context.Context) error {
		return e.opt.Elector.Run(ctx, LeaseName, holder, func(ctx context.Context, token int64) error {
			tctx, end := e.db.StartTerm(ctx, token)
			defer end()
			e.log.Info("processor lease acquired; active", "token", token, "holder", holder)
			err := lifecycle.NewManager(e.log, e.loops()...).Run(tctx)
			if cause := context.Cause(tctx); errors.Is(cause, lease.ErrFenced) {
				e.log.Warn("processor term ended: a fenced write was refused; standby", "token", token, "err", cause,
					"alert", "processor-fenced")
				return errors.Join(cause, err)
			}
			e.log.Info("processor term ended; standby", "token", token, "err", err)
			return err
		})
	}, nil)}
}
