package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Outcome is how one transaction of a Term ended, as told to an Observer.
type Outcome string

// Outcomes of a Term's transactions.
const (
	// Committed: the transaction committed.
	Committed Outcome = "committed"
	// RolledBack: the work or the commit failed; nothing was committed.
	RolledBack Outcome = "rolled_back"
	// Refused: the fence refused the term's token; nothing was committed
	// and the term ended.
	Refused Outcome = "fenced"
)

// outcomeOf classifies the result of a transaction that began.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return Committed
	case errors.Is(err, ErrFenced):
		return Refused
	default:
		return RolledBack
	}
}

// Observer hears the outcome of every transaction a Term began (one that
// ended before reaching PostgreSQL is not told). It runs on the writing
// goroutine, so it must be cheap and must not block: a metric counter.
type Observer func(ctx context.Context, o Outcome)

// ErrNoTerm is the refusal of a write asked of Terms while no term is
// current: the instance is standby, or its term ended. It wraps ErrFenced,
// so callers treat it like a refusal: stop writing.
var ErrNoTerm = fmt.Errorf("writing without a lease term: %w", ErrFenced)

// Pool is what Terms is built on (*pgxpool.Pool): it begins transactions
// and reads.
type Pool interface {
	Beginner
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Terms is the only handle on PostgreSQL of a component that runs
// single-active under one lease across many terms (the processor): reads
// go to the pool, writes only to the current Term, which Start makes
// current for the span of one term. The pool itself stays unexported, so a
// component holding Terms cannot open a transaction that does not end with
// the fence (R-B8): the compiler refuses it. Safe for concurrent use.
type Terms struct {
	pool    Pool
	writer  *Writer
	name    string
	current atomic.Pointer[Term]
}

// NewTerms returns the Terms of lease name over pool: every transaction
// proves the current term's token still live, and writes outside a term
// fail with ErrNoTerm. observe (may be nil) hears every outcome.
func NewTerms(pool Pool, name string, observe Observer) *Terms {
	return &Terms{pool: pool, writer: &Writer{db: pool, observe: observe}, name: name}
}

// NewUnfencedTerms returns Terms without a lease, whose one term never
// ends and commits without the fence: for a component run alone (its
// tests). A component that runs under an Elector uses NewTerms.
func NewUnfencedTerms(pool Pool, observe Observer) *Terms {
	s := &Terms{pool: pool, writer: &Writer{db: pool, observe: observe}}
	s.current.Store(s.writer.Unfenced())
	return s
}

// Query runs a read on the pool.
func (s *Terms) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return s.pool.Query(ctx, sql, args...)
}

// QueryRow runs a one-row read on the pool.
func (s *Terms) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.pool.QueryRow(ctx, sql, args...)
}

// SendBatch runs reads on the pool in one round trip (a pipelined batch in
// one implicit transaction, outside any term): for a loop that reads
// several things before it writes, on a path where each round trip counts
// (R-M2). Like Query, it is for reads; writes go through InTx.
func (s *Terms) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return s.pool.SendBatch(ctx, b)
}

// Start makes the term token current and returns a context derived from
// ctx that ends, with a cause wrapping ErrFenced, at the term's first
// refusal (see Writer.Term): run the term's work under it. end ends the
// term when its work has returned: from then on writes fail with
// ErrNoTerm until the next Start.
func (s *Terms) Start(ctx context.Context, token int64) (termCtx context.Context, end func()) {
	t, tctx, cancel := s.writer.Term(ctx, s.name, token)
	s.current.Store(t)
	return tctx, func() {
		s.current.CompareAndSwap(t, nil)
		cancel()
	}
}

// Term returns the current term, or nil while there is none.
func (s *Terms) Term() *Term { return s.current.Load() }

// InTx runs fn in a fenced transaction of the current term (Term.InTx):
// without a current term, or after the term was refused, fn never runs and
// the error wraps ErrFenced.
func (s *Terms) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	t := s.current.Load()
	if t == nil {
		return ErrNoTerm
	}
	return t.InTx(ctx, fn)
}

// Exec runs one statement in a fenced transaction of the current term.
func (s *Terms) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t := s.current.Load()
	if t == nil {
		return pgconn.CommandTag{}, ErrNoTerm
	}
	return t.Exec(ctx, sql, args...)
}

// Check proves the current term current right now (Term.Check).
func (s *Terms) Check(ctx context.Context) error {
	t := s.current.Load()
	if t == nil {
		return ErrNoTerm
	}
	return t.Check(ctx)
}
