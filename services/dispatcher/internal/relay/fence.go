package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
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
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults // pipelined reads (ReadChecked)
}

// db returns target's fenced writer: the target's lease.Terms, whose
// current term Start sets for the span of each term (single), or whose one
// unfenced term never ends when the relay runs without an elector (tests).
func (r *Relay) db(target string) fencedDB { return fencedDB{terms: r.terms[target], target: target} }

// fencedDB is the write access of one target; outside a term every call is
// refused with an error wrapping lease.ErrFenced (lease.ErrNoTerm).
type fencedDB struct {
	terms  *lease.Terms
	target string
}

// InTx runs fn in a fenced transaction of the target's term.
func (f fencedDB) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if err := f.terms.InTx(ctx, fn); err != nil {
		return fmt.Errorf("writing for %s: %w", f.target, err)
	}
	return nil
}

// Exec runs one statement in a fenced transaction of the target's term.
func (f fencedDB) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := f.terms.Exec(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("writing for %s: %w", f.target, err)
	}
	return tag.RowsAffected(), nil
}

// ReadChecked sends the reads queued on b on db with the target's term
// check after them, in one round trip (lease.Term.ReadChecked): the reads
// of what is about to go out and the proof that it may.
func (f fencedDB) ReadChecked(ctx context.Context, db reader, b *pgx.Batch) error {
	t := f.terms.Term()
	if t == nil {
		return fmt.Errorf("reading for %s: %w", f.target, lease.ErrNoTerm)
	}
	return t.ReadChecked(ctx, db, b)
}

// Check proves the target's term current before a side effect outside
// PostgreSQL: a Kafka produce, a mailbox marker, a COUTMSGS insert (R-H6).
func (f fencedDB) Check(ctx context.Context) error {
	if err := f.terms.Check(ctx); err != nil {
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
// and stands by. Nothing of the old term is retried (R-H6). A loop stalled
// past the stall limit ends the service with the stall instead (R-L8).
func (r *Relay) single(target string, build func() *lifecycle.Service) *lifecycle.Service {
	if r.opt.Elector == nil {
		return build()
	}
	holder := r.holder()
	return lifecycle.NewService("dispatcher-"+target+"-leader", nil, func(svcCtx context.Context) error {
		// A loop stalled past its limit ends the service and the process,
		// not only the term, so that the supervisor restarts it (R-L8).
		runCtx, stalled := context.WithCancelCause(svcCtx)
		defer stalled(nil)
		err := r.opt.Elector.Run(runCtx, LeaseName(target), holder, func(ctx context.Context, token int64) error {
			tctx, end := r.terms[target].Start(ctx, token)
			defer end()
			term := r.terms[target].Term()
			r.log.Info("dispatcher target lease acquired; active", "target", target, "token", token)
			err := lifecycle.NewManager(r.log, build()).Run(tctx)
			if errors.Is(err, progress.ErrStalled) {
				stalled(err)
			} else {
				r.standby(target) // a loop that does not run cannot stall
			}
			if ferr := term.Err(); ferr != nil {
				return ferr
			}
			r.log.Info("dispatcher target term ended; standby", "target", target, "err", err)
			return err
		})
		if cause := context.Cause(runCtx); errors.Is(cause, progress.ErrStalled) {
			return cause
		}
		return err
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
