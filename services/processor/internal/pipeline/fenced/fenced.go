package fenced

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgexchange/libs/lease"
)

// ErrNoTerm means a fenced DB was asked to write outside a lease term: the
// instance is standby, or its term ended (a refused fence or the end of
// the term's function). It wraps lease.ErrFenced, so callers treat it like
// a refusal: stop writing.
var ErrNoTerm = fmt.Errorf("writing without a lease term: %w", lease.ErrFenced)

// Outcome is how one transaction of InTx ended, as counted by the Observer.
type Outcome string

// Outcomes of InTx.
const (
	// Committed: the transaction committed.
	Committed Outcome = "committed"
	// RolledBack: fn failed or the commit failed; nothing was committed.
	RolledBack Outcome = "rolled_back"
	// Refused: the fence refused the term's token; nothing was committed
	// and the term ended.
	Refused Outcome = "fenced"
)

// Observer is told the outcome of every transaction that reached
// PostgreSQL; it must be cheap and must not block.
type Observer func(ctx context.Context, o Outcome)

// DB is a pool that writes only in fenced transactions.
type DB struct {
	pool    *pgxpool.Pool
	lease   string
	fenced  bool
	observe Observer
	term    atomic.Pointer[term]
}

// term is one lease term: its token and how to end it.
type term struct {
	token int64
	end   context.CancelCauseFunc
	over  atomic.Bool
}

// New returns a DB over pool. With fenced, every transaction proves that
// the current term's token of lease is still the live one, and writes
// outside a term fail with ErrNoTerm; without it (tests of a component
// alone, no lease) transactions are plain. observe may be nil.
func New(pool *pgxpool.Pool, leaseName string, fenced bool, observe Observer) *DB {
	if observe == nil {
		observe = func(context.Context, Outcome) {}
	}
	return &DB{pool: pool, lease: leaseName, fenced: fenced, observe: observe}
}

// Query runs a read on the pool.
func (d *DB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return d.pool.Query(ctx, sql, args...)
}

// QueryRow runs a one-row read on the pool.
func (d *DB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.pool.QueryRow(ctx, sql, args...)
}

// StartTerm begins a lease term with token. The returned context is ctx,
// cancelled with a cause wrapping lease.ErrFenced as soon as any
// transaction of the term is refused by the fence; run the term's loops
// under it. end ends the term (call it when the term's function returns):
// from then on writes fail with ErrNoTerm until the next StartTerm.
func (d *DB) StartTerm(ctx context.Context, token int64) (termCtx context.Context, end func()) {
	tctx, cancel := context.WithCancelCause(ctx)
	t := &term{token: token, end: cancel}
	d.term.Store(t)
	return tctx, func() {
		t.over.Store(true)
		d.term.CompareAndSwap(t, nil)
		cancel(context.Canceled)
	}
}

// InTx runs fn in a transaction and commits it. When the DB is fenced, the
// lease check runs inside PostgreSQL as the last statement before COMMIT,
// so an instance that lost its lease (a paused zombie) commits nothing. A
// refusal ends the term (see StartTerm) and is returned wrapping
// lease.ErrFenced; fn's own error rolls back and is returned as is.
func (d *DB) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	var t *term
	if d.fenced {
		if t = d.term.Load(); t == nil || t.over.Load() {
			return ErrNoTerm
		}
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		d.observe(ctx, RolledBack)
		return err
	}
	if t != nil {
		if err := lease.Fence(ctx, tx, d.lease, t.token); err != nil {
			if errors.Is(err, lease.ErrFenced) {
				d.refuse(t, err)
				d.observe(ctx, Refused)
			} else {
				d.observe(ctx, RolledBack)
			}
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		d.observe(ctx, RolledBack)
		return fmt.Errorf("committing transaction: %w", err)
	}
	d.observe(ctx, Committed)
	return nil
}

// refuse ends term t after its fence was refused: no transaction of t
// reaches PostgreSQL again, and its loops are cancelled with the refusal.
func (d *DB) refuse(t *term, err error) {
	if t.over.Swap(true) {
		return
	}
	d.term.CompareAndSwap(t, nil)
	t.end(fmt.Errorf("ending lease term %d: %w", t.token, err))
}
