package pipeline

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/pgxutil"
)

// LeaseName is the processor's lease: one active processor at a time
// (R-B8, PRE-5).
const LeaseName = "processor"

// Elector runs fn while this instance holds a lease (libs/lease.Elector).
type Elector interface {
	Run(ctx context.Context, name, holder string, fn func(ctx context.Context, token int64) error) error
}

// fencing holds the token of the current lease term; 0 outside a term.
type fencing struct {
	token atomic.Int64
}

// inTx runs fn in a transaction that is fenced: the lease check runs inside
// PostgreSQL as the last statement before COMMIT, so a processor that lost
// its lease (a paused zombie) can commit nothing (R-B8, CLM-6). Without an
// elector (tests of the engine alone) there is no lease to check.
func (e *Engine) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgxutil.InTx(ctx, e.pool, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return e.fence(ctx, tx)
	})
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

func (e *Engine) fence(ctx context.Context, tx pgx.Tx) error {
	if e.opt.Elector == nil {
		return nil
	}
	token := e.fencing.token.Load()
	if token == 0 {
		return fmt.Errorf("writing without a lease term: %w", lease.ErrFenced)
	}
	return lease.Fence(ctx, tx, LeaseName, token)
}

// Services returns the processor's lifecycle services. With an elector it
// is one service that waits as standby until it holds the processor lease
// and then runs every loop for as long as the term lasts; each term starts
// the loops afresh, so positions are read from PostgreSQL after the lease is
// won (the previous holder may have moved them).
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
			e.fencing.token.Store(token)
			defer e.fencing.token.Store(0)
			e.log.Info("processor lease acquired; active", "token", token, "holder", holder)
			err := lifecycle.NewManager(e.log, e.loops()...).Run(ctx)
			e.log.Info("processor term ended; standby", "token", token, "err", err)
			return err
		})
	}, nil)}
}
