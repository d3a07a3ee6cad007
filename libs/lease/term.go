package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Writer hands out the write access of lease terms on one database. It
// keeps the read-write pool to itself: a single-active component that is
// given a Writer and a read-only view of the pool (Query and QueryRow)
// has no way to open a transaction that does not end with the fence, so
// "every write is fenced" holds by construction, not by review (R-H6).
type Writer struct {
	db      Beginner
	observe Observer
}

// NewWriter returns the Writer of db (*pgxpool.Pool in production).
func NewWriter(db Beginner) *Writer { return &Writer{db: db} }

// Term returns the write access of term token of lease name, and a context
// derived from ctx that ends, with a cause wrapping ErrFenced, as soon as
// one of the term's checks or fenced commits is refused. Run the term's
// work under that context, so a refusal stops all of it at once; call
// cancel when the term's work has returned.
func (w *Writer) Term(ctx context.Context, name string, token int64) (*Term, context.Context, context.CancelFunc) {
	tctx, cancel := context.WithCancelCause(ctx)
	t := &Term{db: w.db, name: name, token: token, fenced: true, end: cancel, observe: w.observe}
	return t, tctx, func() { cancel(context.Canceled) }
}

// Unfenced returns a Term without a lease: its transactions commit without
// the fence and its checks always pass. It is for a component run alone
// (its tests, or a deployment without standbys); a component that runs
// under an Elector uses Writer.Term.
func (w *Writer) Unfenced() *Term { return &Term{db: w.db, observe: w.observe} }

// NewRemoteTerm returns the Term of a component that writes nothing to
// PostgreSQL and whose side effects are outside it (ingest's scanner
// produces to Kafka): its Check asks confirm, typically Elector.Confirm,
// whether the term is still current; its InTx is refused. The returned
// context ends like Writer.Term's at the first refusal.
func NewRemoteTerm(ctx context.Context, name string, token int64, confirm func(context.Context) error) (*Term, context.Context, context.CancelFunc) {
	tctx, cancel := context.WithCancelCause(ctx)
	t := &Term{name: name, token: token, fenced: true, confirm: confirm, end: cancel}
	return t, tctx, func() { cancel(context.Canceled) }
}

// Term is the right of one lease term to write and to cause side effects.
// Every transaction it opens ends with msgx_fence(name, token) as its last
// statement before COMMIT, and Check proves the term current before a side
// effect outside PostgreSQL (a Kafka produce, a MySQL write). The first
// refusal ends the term for good: the term's context is cancelled with the
// refusal as its cause, and every later InTx, Exec or Check returns an
// error wrapping ErrFenced without touching the database, so no loop can
// retry a side effect under the old token. Safe for concurrent use.
type Term struct {
	db      Beginner
	name    string
	token   int64
	fenced  bool
	confirm func(context.Context) error
	end     context.CancelCauseFunc
	observe Observer // nil: nobody counts the outcomes

	mu    sync.Mutex
	ended error
}

// Name returns the lease name ("" for an unfenced Term).
func (t *Term) Name() string { return t.name }

// Token returns the term's fencing token (0 for an unfenced Term).
func (t *Term) Token() int64 { return t.token }

// Err returns the refusal that ended the term (wrapping ErrFenced), or nil
// while the term stands.
func (t *Term) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// refused ends the term with err when err wraps ErrFenced, and returns err.
func (t *Term) refused(err error) error {
	if !errors.Is(err, ErrFenced) {
		return err
	}
	t.mu.Lock()
	if t.ended == nil {
		t.ended = err
		if t.end != nil {
			t.end(err)
		}
	}
	t.mu.Unlock()
	return err
}

// InTx runs fn in a transaction that ends with the fence and COMMIT. fn's
// error rolls back and is returned as is. A refused fence rolls back,
// ends the term and returns an error wrapping ErrFenced; so does every
// call after the term ended. A failed COMMIT is returned as it is (nothing
// was committed; the term is not ended, the next Check decides).
func (t *Term) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if err := t.Err(); err != nil {
		return err
	}
	if t.db == nil {
		return fmt.Errorf("writing under lease %s token %d: the term has no database", t.name, t.token)
	}
	if !t.fenced {
		return inTx(ctx, t.db, fn, nil, t.observe)
	}
	return t.refused(inTx(ctx, t.db, fn, &fenceOf{name: t.name, token: t.token}, t.observe))
}

// Exec runs one statement in a fenced transaction: on a pool BEGIN, the
// statement, the fence and COMMIT in one round trip (SendAtCommit). Its
// command tag is known only once the transaction committed, so the
// statement cannot make the commit depend on it; a caller that must
// decide from the tag whether to commit writes its own InTx.
func (t *Term) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := t.InTx(ctx, func(tx pgx.Tx) error {
		if multi(sql, args) {
			var err error
			tag, err = tx.Exec(ctx, sql, args...)
			return err
		}
		b := &pgx.Batch{}
		b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error {
			tag = ct
			return nil
		})
		return SendAtCommit(ctx, tx, b)
	})
	return tag, err
}

// Check proves the term still current right now; call it before every
// side effect outside PostgreSQL. It runs msgx_fence in a statement of its
// own (or asks the confirm function of a remote term). A refusal ends the
// term and returns an error wrapping ErrFenced; another error (the database
// or the control plane unreachable) means "unknown": do not cause the side
// effect, retry later.
//
// What Check cannot close: the lease may be lost between Check and the
// side effect. Such a side effect happens once, the commit that would
// record it is refused, and the term ends; the new holder repeats it (at
// least once, same record or marker), the old one never does.
func (t *Term) Check(ctx context.Context) error {
	if err := t.Err(); err != nil {
		return err
	}
	if !t.fenced {
		return nil
	}
	if t.confirm != nil {
		return t.refused(t.confirm(ctx))
	}
	if x, ok := t.db.(execer); ok {
		return t.refused(fence(ctx, x, t.name, t.token))
	}
	return t.refused(inTx(ctx, t.db, func(pgx.Tx) error { return nil }, &fenceOf{name: t.name, token: t.token}, nil))
}

// ReadChecked sends the reads queued on b (their callbacks hear the rows)
// with the term's check after them, in one round trip: for a loop that
// reads what it is about to send and must prove its term before it sends
// it (Check), on a path where each round trip counts (R-M2). The check
// runs after the reads, inside PostgreSQL, so it is as late as Check
// called after them would be. A refused check ends the term and returns
// an error wrapping ErrFenced; a read that fails returns its error, and
// the term is then unproved. A remote term (NewRemoteTerm) reads nothing:
// use Check.
func (t *Term) ReadChecked(ctx context.Context, db interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, b *pgx.Batch) error {
	if err := t.Err(); err != nil {
		return err
	}
	if t.confirm != nil {
		return fmt.Errorf("reading under lease %s token %d: a remote term reads nothing", t.name, t.token)
	}
	if t.fenced {
		b.Queue(fenceSQL, t.name, t.token)
	}
	err := db.SendBatch(ctx, b).Close()
	var pgErr *pgconn.PgError
	if t.fenced && errors.As(err, &pgErr) && pgErr.Code == FencedSQLState {
		return t.refused(fenceError(t.name, t.token, err))
	}
	return err
}

// execer runs a statement outside an explicit transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// fenceOf names the fence of a transaction: lease name at token.
type fenceOf struct {
	name  string
	token int64
}

// inTx runs fn, then the fence f (none when f is nil), then COMMIT, and
// tells observe (when not nil) how a transaction that began ended. On a
// pool the transaction is lazy (lazytx.go): BEGIN goes with fn's first
// statement and the fence with COMMIT, two round trips fewer.
func inTx(ctx context.Context, db Beginner, fn func(pgx.Tx) error, f *fenceOf, observe Observer) error {
	var began bool
	var err error
	commitSQL, lazy := "", true
	if f != nil {
		commitSQL, lazy = fenceCommitSQL(f.name, f.token)
	}
	if p, ok := db.(pooled); ok && lazy {
		began, err = inLazyTx(ctx, p, fn, f, commitSQL)
	} else {
		began, err = inPlainTx(ctx, db, fn, f)
	}
	if began && observe != nil {
		observe(ctx, outcomeOf(err))
	}
	return err
}

// inPlainTx is inTx with BEGIN, the fence and COMMIT each a statement of
// its own: for a Beginner that is not a pool (a connection, a savepoint).
func inPlainTx(ctx context.Context, db Beginner, fn func(pgx.Tx) error, f *fenceOf) (began bool, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("beginning fenced transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return true, err
	}
	if f != nil {
		if err := fence(ctx, tx, f.name, f.token); err != nil {
			return true, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return true, fmt.Errorf("committing fenced transaction: %w", err)
	}
	return true, nil
}
