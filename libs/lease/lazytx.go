package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A fenced transaction written the plain way costs three round trips to
// PostgreSQL besides its own statements: BEGIN, the fence and COMMIT. On a
// slow path that is most of a loop's time — at 200 ms per round trip a
// one-statement transaction took 800 ms, four times its work (R-M2). The
// lazy transaction below keeps the transaction's meaning and sends those
// three with the work:
//
//   - BEGIN travels with the transaction's first statement or batch, in one
//     pipelined batch (pgx's Batch.BeginTx, whose Tx is then an ordinary
//     pgx transaction for the rest of the work);
//   - the fence and COMMIT travel together as the transaction's commit
//     query ("SELECT msgx_fence(…); commit", pgx's TxOptions.CommitQuery),
//     one simple-protocol message: PostgreSQL runs the fence first and
//     stops at its error, so a refused fence still commits nothing, and the
//     fence stays the last statement before COMMIT, holding its share lock
//     on the lease row to the commit (see Fence).
//
// A one-statement fenced transaction thus costs two round trips, whatever
// the latency; TestLazyTx_R_M2_FencedTransactionRoundTrips counts them.
// A transaction whose work ends in a batch of writes saves one more with
// SendAtCommit: that batch, the fence and COMMIT go in one pipeline, and a
// transaction that is one such batch costs one round trip.

// pooled is a Beginner that lends connections (*pgxpool.Pool): the lazy
// transaction needs the connection itself to send BEGIN with the first
// statement.
type pooled interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// fenceCommitSQL is the commit query of a transaction fenced by lease name
// at token: the fence, then COMMIT, in one message. ok is false when name
// cannot be written as a plain string literal (it never is in this
// project: lease names are identifiers and paths); the caller then fences
// with a statement of its own.
func fenceCommitSQL(name string, token int64) (sql string, ok bool) {
	if strings.ContainsAny(name, "'\\\x00") {
		return "", false
	}
	return "SELECT msgx_fence('" + name + "', " + strconv.FormatInt(token, 10) + "); commit", true
}

// lazyTx is a pgx.Tx on one connection whose BEGIN is sent with its first
// statement. Until then it holds no transaction; from then on it delegates
// to the pgx transaction that statement's batch began.
type lazyTx struct {
	conn *pgx.Conn
	opts pgx.TxOptions
	tx   pgx.Tx // nil until the first statement was sent
	done bool   // ended without having begun
	// last is what SendAtCommit queued, to go with the fence and COMMIT.
	last *pgx.Batch
	// after is what ReadAfterCommit queued, to follow COMMIT.
	after *pgx.Batch
	// ended: the transaction ended with last's pipeline (committed or
	// rolled back); neither pgx's transaction nor a rollback is used again.
	ended bool
}

// ErrCommitUnknown wraps the error of a callback of a batch sent with
// COMMIT (SendAtCommit) that failed on the client's side (a scan) while
// PostgreSQL ran the statements: the transaction may have committed, and
// what the callback was to collect is not known.
var ErrCommitUnknown = errors.New("a batch sent with its commit was not read: the transaction may have committed")

// SendAtCommit queues b as the last statements of tx, to travel with its
// commit. In a transaction of Term.InTx or Terms.InTx on a pool, b, the
// fence and COMMIT go to PostgreSQL in one pipeline once fn has returned:
// a round trip fewer for every transaction that ends in a batch of writes,
// and a transaction that is one such batch costs one (R-M2). In any other
// transaction b is sent at once.
//
// b's callbacks run when its results arrive — with a pooled transaction
// after COMMIT went out behind its statements. So a callback may only
// collect what the statements return; a condition the commit depends on
// belongs in the SQL (msgx_check), where a failing statement makes
// PostgreSQL skip the fence and COMMIT: nothing is committed and InTx
// returns that statement's error. A callback that fails on the client's
// side makes InTx return its error wrapping ErrCommitUnknown.
//
// A statement fn sends after SendAtCommit sends b first; another
// SendAtCommit adds its batch behind b.
func SendAtCommit(ctx context.Context, tx pgx.Tx, b *pgx.Batch) error {
	l, ok := tx.(*lazyTx)
	if !ok {
		return tx.SendBatch(ctx, b).Close()
	}
	if l.ended || (l.done && l.tx == nil) {
		return pgx.ErrTxClosed
	}
	if l.last == nil {
		l.last = &pgx.Batch{}
	}
	l.last.QueuedQueries = append(l.last.QueuedQueries, b.QueuedQueries...)
	return nil
}

// ReadAfterCommit queues the reads of b to follow the COMMIT of tx in the
// same pipeline, outside the transaction: what a loop reads next, fresh
// after its commit, at no round trip of its own (R-M2). It reports whether
// they were queued: only a transaction of Term.InTx or Terms.InTx on a
// pool whose last batch went with SendAtCommit takes them; otherwise the
// caller reads when it needs to. b's callbacks run only if the transaction
// committed; what they return does not change InTx's result, so a callback
// notes its own success.
func ReadAfterCommit(tx pgx.Tx, b *pgx.Batch) bool {
	l, ok := tx.(*lazyTx)
	if !ok || l.ended || l.last == nil {
		return false
	}
	if l.after == nil {
		l.after = &pgx.Batch{}
	}
	l.after.QueuedQueries = append(l.after.QueuedQueries, b.QueuedQueries...)
	return true
}

// flush sends what SendAtCommit queued, before a statement that fn sends
// after it.
func (l *lazyTx) flush(ctx context.Context) error {
	if l.last == nil {
		return nil
	}
	b := l.last
	l.last = nil
	return l.SendBatch(ctx, b).Close()
}

// commitWith ends the transaction with one pipeline: BEGIN if no statement
// began it, the batch SendAtCommit queued, the fence f (none when nil)
// and COMMIT. Whatever fails before COMMIT — a statement, the fence —
// makes PostgreSQL skip the rest to the pipeline's end: the transaction is
// then rolled back here, and the first error returned.
func (l *lazyTx) commitWith(ctx context.Context, f *fenceOf) error {
	b := l.last
	l.last = nil
	p := &pgx.Batch{}
	if l.tx == nil {
		p.Queue("begin")
	}
	p.QueuedQueries = append(p.QueuedQueries, b.QueuedQueries...)
	if f != nil {
		p.Queue(fenceSQL, f.name, f.token)
	}
	p.Queue("commit")
	commitAt := len(p.QueuedQueries) - 1
	if l.after != nil {
		p.QueuedQueries = append(p.QueuedQueries, l.after.QueuedQueries...)
		l.after = nil
	}
	l.ended = true
	br := l.conn.SendBatch(ctx, p)
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	var committed bool
	for i, q := range p.QueuedQueries {
		switch {
		case i > commitAt:
			// The reads after COMMIT: only once it committed, their errors
			// their callbacks' own.
			if committed && q.Fn != nil {
				_ = q.Fn(br)
			}
		case q.Fn != nil:
			note(q.Fn(br))
		case i == commitAt:
			_, err := br.Exec()
			committed = err == nil && first == nil
			note(err)
		default:
			_, err := br.Exec()
			note(err)
		}
	}
	if committed {
		_ = br.Close() // an error of a read after COMMIT is its callback's
		return nil
	}
	note(br.Close())
	// A callback that failed on the client's side (a scan, or its own
	// verdict) fails every later read of the batch in pgx, the COMMIT's
	// too, while PostgreSQL ran the pipeline on: idle and no error of
	// PostgreSQL's means it reached its end.
	var pgErr *pgconn.PgError
	switch {
	case committed && first == nil:
		return nil
	case committed || (!errors.As(first, &pgErr) && !l.conn.IsClosed() && l.conn.PgConn().TxStatus() == 'I'):
		return fmt.Errorf("%w: %w", ErrCommitUnknown, first)
	}
	if l.conn.PgConn().TxStatus() != 'I' {
		if _, err := l.conn.Exec(context.WithoutCancel(ctx), "rollback"); err != nil {
			_ = l.conn.Close(context.WithoutCancel(ctx))
		}
	}
	if f != nil && errors.As(first, &pgErr) && pgErr.Code == FencedSQLState {
		return fenceError(f.name, f.token, first)
	}
	return first
}

// begun reports whether the first statement is behind it: BEGIN was sent,
// or the transaction ended without one. Later calls go to pgx's
// transaction (begin).
func (l *lazyTx) begun() bool { return l.tx != nil || l.done }

// begin returns the transaction, beginning it with a round trip of its own
// when no statement began it yet (the calls that cannot carry BEGIN: a
// savepoint, COPY, large objects). What SendAtCommit queued is sent first.
func (l *lazyTx) begin(ctx context.Context) (pgx.Tx, error) {
	if err := l.flush(ctx); err != nil {
		return nil, err
	}
	if l.ended {
		return nil, pgx.ErrTxClosed
	}
	if l.tx != nil {
		return l.tx, nil
	}
	if l.done {
		return nil, pgx.ErrTxClosed
	}
	b := &pgx.Batch{}
	b.BeginTx(l.opts)
	br := l.conn.SendBatch(ctx, b)
	l.tx = br.Tx()
	if err := br.Close(); err != nil {
		return nil, err
	}
	return l.tx, nil
}

// send sends b with BEGIN queued before it and returns its results with
// BEGIN's already read.
func (l *lazyTx) send(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	nb := &pgx.Batch{}
	nb.BeginTx(l.opts)
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := l.conn.SendBatch(ctx, nb)
	l.tx = br.Tx()
	if _, err := br.Exec(); err != nil {
		return failedBatch{br: br, err: err}
	}
	return br
}

// one sends sql with BEGIN before it and returns its batch's results.
func (l *lazyTx) one(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return l.send(ctx, b)
}

// multi reports whether sql, sent without arguments, may hold several
// statements: pgx sends such an Exec by the simple protocol, which runs
// them all, and a batch would refuse it. A semicolon in a literal only
// costs the round trip of a BEGIN of its own.
func multi(sql string, args []any) bool {
	return len(args) == 0 && strings.Contains(sql, ";")
}

func (l *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := l.flush(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	if l.begun() || multi(sql, args) {
		tx, err := l.begin(ctx)
		if err != nil {
			return pgconn.CommandTag{}, err
		}
		return tx.Exec(ctx, sql, args...)
	}
	br := l.one(ctx, sql, args)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (l *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := l.flush(ctx); err != nil {
		return nil, err
	}
	if l.begun() {
		tx, err := l.begin(ctx)
		if err != nil {
			return nil, err
		}
		return tx.Query(ctx, sql, args...)
	}
	br := l.one(ctx, sql, args)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return rows, err
	}
	return batchRows{Rows: rows, br: br}, nil
}

func (l *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := l.flush(ctx); err != nil {
		return errRow{err}
	}
	if l.begun() {
		tx, err := l.begin(ctx)
		if err != nil {
			return errRow{err}
		}
		return tx.QueryRow(ctx, sql, args...)
	}
	rows, err := l.Query(ctx, sql, args...)
	return batchRow{rows: rows, err: err}
}

func (l *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := l.flush(ctx); err != nil {
		return failedBatch{err: err}
	}
	if l.ended {
		return failedBatch{err: pgx.ErrTxClosed}
	}
	if l.begun() {
		tx, err := l.begin(ctx)
		if err != nil {
			return failedBatch{err: err}
		}
		return tx.SendBatch(ctx, b)
	}
	return l.send(ctx, b)
}

// Begin opens a savepoint (pgx's pseudo nested transaction).
func (l *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (l *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := l.begin(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

// LargeObjects begins the transaction if no statement did (large objects
// live only inside one); should that fail, the returned value's calls
// fail with the closed transaction's error.
func (l *lazyTx) LargeObjects() pgx.LargeObjects {
	_, _ = l.begin(context.Background())
	if l.tx == nil {
		return pgx.LargeObjects{}
	}
	return l.tx.LargeObjects()
}

func (l *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if l.ended || (l.done && l.tx == nil) {
		return nil, pgx.ErrTxClosed
	}
	return l.conn.Prepare(ctx, name, sql)
}

func (l *lazyTx) Conn() *pgx.Conn { return l.conn }

// Commit commits with the commit query (the fence and COMMIT). A
// transaction that sent nothing has nothing to commit: it is closed.
func (l *lazyTx) Commit(ctx context.Context) error { return l.end(ctx, pgx.Tx.Commit) }

// Rollback rolls back what was sent; a transaction that sent nothing is
// closed.
func (l *lazyTx) Rollback(ctx context.Context) error { return l.end(ctx, pgx.Tx.Rollback) }

// end ends the transaction with how (Commit or Rollback) once it began,
// and closes it without a statement when it did not.
func (l *lazyTx) end(ctx context.Context, how func(pgx.Tx, context.Context) error) error {
	if l.ended {
		return pgx.ErrTxClosed
	}
	if l.tx != nil {
		return how(l.tx, ctx)
	}
	if l.done {
		return pgx.ErrTxClosed
	}
	l.done = true
	return nil
}

// batchRows are a query's rows read from the batch that began the
// transaction: closing them closes the batch, which frees the connection.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

// batchRow is QueryRow's row over batchRows, with pgx's QueryRow rules: no
// row is pgx.ErrNoRows, the rows are closed after the scan.
type batchRow struct {
	rows pgx.Rows
	err  error
}

func (r batchRow) Scan(dest ...any) error {
	if r.err != nil {
		if r.rows != nil {
			r.rows.Close()
		}
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errRow is a row whose query could not be sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// failedBatch is the results of a batch whose BEGIN, or the round trip
// that would carry it, failed: every read returns that error; Close closes
// the batch that was sent, if any.
type failedBatch struct {
	br  pgx.BatchResults
	err error
}

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return errRow{f.err} }
func (f failedBatch) Tx() pgx.Tx                       { return nil }
func (f failedBatch) Close() error {
	if f.br != nil {
		if err := f.br.Close(); err != nil {
			return err
		}
	}
	return f.err
}

// inLazyTx runs fn in a lazy transaction on a connection of db and
// commits it, fenced by f unless f is nil: with the fence and COMMIT in
// one message, or, for a transaction that sent no statement, with the
// fence alone — nothing to commit, the term proved all the same. began
// reports whether a connection was had (see inTx).
func inLazyTx(ctx context.Context, db pooled, fn func(pgx.Tx) error, f *fenceOf, commitSQL string) (began bool, err error) {
	c, err := db.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("beginning fenced transaction: %w", err)
	}
	defer c.Release()
	l := &lazyTx{conn: c.Conn(), opts: pgx.TxOptions{CommitQuery: commitSQL}}
	defer func() { _ = l.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(l); err != nil {
		return true, err
	}
	if l.last != nil {
		return true, l.commitWith(ctx, f)
	}
	l.after = nil // reads after a COMMIT sent on its own: the caller reads
	if l.tx == nil {
		l.done = true
		if f == nil {
			return true, nil
		}
		return true, fence(ctx, c, f.name, f.token)
	}
	if err := l.tx.Commit(ctx); err != nil {
		if f != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == FencedSQLState {
				return true, fenceError(f.name, f.token, err)
			}
		}
		return true, fmt.Errorf("committing fenced transaction: %w", err)
	}
	return true, nil
}
