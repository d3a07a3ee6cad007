package relay

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
)

// Elector runs fn while this instance holds a lease (libs/lease.Elector).
type Elector interface {
	Run(ctx context.Context, name, holder string, fn func(ctx context.Context, token int64) error) error
}

// LeaseName is the lease of one target: each target is single-active on its
// own, so targets fail over independently (R-B8).
func LeaseName(target string) string { return "dispatcher/" + target }

// reader is all of PostgreSQL the relay's loops may use outside a lease
// term: reads. Writes go only through the target's *lease.Term, which keeps
// the read-write pool to itself and ends every transaction with the fence
// (R-B8, R-H6).
type reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// terms holds the current lease term of each target.
type terms struct {
	mu    sync.Mutex
	terms map[string]*lease.Term
}

func (t *terms) set(target string, term *lease.Term) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.terms == nil {
		t.terms = map[string]*lease.Term{}
	}
	if term == nil {
		delete(t.terms, target)
		return
	}
	t.terms[target] = term
}

func (t *terms) get(target string) *lease.Term {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.terms[target]
}

// errNoTerm is the refusal of a write for a target whose lease is not held.
var errNoTerm = fmt.Errorf("no lease term: %w", lease.ErrFenced)

// term returns the write access of target: the current lease term, an
// unfenced one when the relay runs without an elector (tests), and nil
// when the relay runs with an elector but does not hold target's lease.
func (r *Relay) term(target string) *lease.Term {
	if r.opt.Elector == nil {
		return r.unfenced
	}
	return r.terms.get(target)
}

// db returns target's fenced writer.
func (r *Relay) db(target string) fencedDB { return fencedDB{term: r.term(target), target: target} }

// fencedDB is the write access of one target; without a term every call is
// refused with ErrFenced.
type fencedDB struct {
	term   *lease.Term
	target string
}

// InTx runs fn in a fenced transaction of the target's term.
func (f fencedDB) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if f.term == nil {
		return fmt.Errorf("writing for %s: %w", f.target, errNoTerm)
	}
	return f.term.InTx(ctx, fn)
}

// Exec runs one statement in a fenced transaction of the target's term.
func (f fencedDB) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if f.term == nil {
		return 0, fmt.Errorf("writing for %s: %w", f.target, errNoTerm)
	}
	tag, err := f.term.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// Check proves the target's term current before a side effect outside
// PostgreSQL: a Kafka produce, a mailbox marker, a COUTMSGS insert (R-H6).
func (f fencedDB) Check(ctx context.Context) error {
	if f.term == nil {
		return fmt.Errorf("checking the lease of %s: %w", f.target, errNoTerm)
	}
	if err := f.term.Check(ctx); err != nil {
		return fmt.Errorf("checking the lease of %s before its side effects: %w", f.target, err)
	}
	return nil
}

// single makes a target's service single-active: it runs the service's
// loop only while holding the target's lease, and each term starts the loop
// afresh. Without an elector the service runs as it is.
//
// The term's loop runs under the Term's context: the first refused check
// or fenced commit cancels it, the loop returns as on shutdown, and the
// refusal goes back to the Elector, which ends the term (one WARN line)
// and stands by. Nothing of the old term is retried (R-H6).
func (r *Relay) single(target string, build func() *lifecycle.Service) *lifecycle.Service {
	if r.opt.Elector == nil {
		return build()
	}
	holder := r.holder()
	return lifecycle.NewService("dispatcher-"+target+"-leader", nil, func(ctx context.Context) error {
		return r.opt.Elector.Run(ctx, LeaseName(target), holder, func(ctx context.Context, token int64) error {
			term, tctx, cancel := r.writer.Term(ctx, LeaseName(target), token)
			defer cancel()
			r.terms.set(target, term)
			defer r.terms.set(target, nil)
			r.log.Info("dispatcher target lease acquired; active", "target", target, "token", token)
			err := lifecycle.NewManager(r.log, build()).Run(tctx)
			if ferr := term.Err(); ferr != nil {
				return ferr
			}
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
