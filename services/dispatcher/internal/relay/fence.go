package relay

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/pgxutil"
)

// Elector runs fn while this instance holds a lease (libs/lease.Elector).
type Elector interface {
	Run(ctx context.Context, name, holder string, fn func(ctx context.Context, token int64) error) error
}

// LeaseName is the lease of one target: each target is single-active on its
// own, so targets fail over independently (R-B8).
func LeaseName(target string) string { return "dispatcher/" + target }

// terms holds the token of each target's current lease term.
type terms struct {
	mu     sync.Mutex
	tokens map[string]int64
}

func (t *terms) set(target string, token int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tokens == nil {
		t.tokens = map[string]int64{}
	}
	t.tokens[target] = token
}

func (t *terms) get(target string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tokens[target]
}

// fencedDB runs a target's writes in transactions that end with the lease
// check inside PostgreSQL, so an instance that lost the target's lease (a
// paused zombie) cannot record anything as sent or failed (R-B8, CLM-6).
type fencedDB struct {
	r      *Relay
	target string
}

// db returns the fenced writer of target.
func (r *Relay) db(target string) fencedDB { return fencedDB{r: r, target: target} }

// InTx runs fn in a fenced transaction.
func (f fencedDB) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgxutil.InTx(ctx, f.r.opt.Pool, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if f.r.opt.Elector == nil {
			return nil
		}
		token := f.r.terms.get(f.target)
		if token == 0 {
			return fmt.Errorf("writing for %s without a lease term: %w", f.target, lease.ErrFenced)
		}
		return lease.Fence(ctx, tx, LeaseName(f.target), token)
	})
}

// Exec runs one statement in a fenced transaction.
func (f fencedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := f.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// single makes a target's service single-active: it runs the service's
// loop only while holding the target's lease, and each term starts the loop
// afresh. Without an elector the service runs as it is.
func (r *Relay) single(target string, build func() *lifecycle.Service) *lifecycle.Service {
	if r.opt.Elector == nil {
		return build()
	}
	holder := r.holder()
	return lifecycle.NewService("dispatcher-"+target+"-leader", nil, func(ctx context.Context) error {
		return r.opt.Elector.Run(ctx, LeaseName(target), holder, func(ctx context.Context, token int64) error {
			r.terms.set(target, token)
			defer r.terms.set(target, 0)
			r.log.Info("dispatcher target lease acquired; active", "target", target, "token", token)
			err := lifecycle.NewManager(r.log, build()).Run(ctx)
			r.log.Info("dispatcher target term ended; standby", "target", target, "err", err)
			return err
		})
	}, nil)
}

// holder names this instance in every target's lease: one name per
// process, so `msgxctl lease list` shows which instance holds what.
func (r *Relay) holder() string {
	r.holderOnce.Do(func() {
		r.holderName = r.opt.Holder
		if r.holderName == "" {
			r.holderName = lease.Holder()
		}
	})
	return r.holderName
}
