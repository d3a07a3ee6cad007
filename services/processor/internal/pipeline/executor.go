package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/procstate"
)

func (e *Engine) executorService() *lifecycle.Service {
	return lifecycle.NewService("processor-executor", nil, func(ctx context.Context) error {
		// A new term: another instance may have registered or replayed
		// messages below anything this engine knew; the head's clock runs
		// again only from the term's first step that reaches the database.
		e.floor.reset()
		e.runningSince = time.Time{}
		e.foreign = foreignMarker{}
		e.snapshots.forget(0)
		for {
			progressed, wait, err := e.Step(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				// The processor's own database is unreachable: pause without
				// burning the head's attempts, then look again.
				e.log.Warn("executing head; pausing", "err", err)
				wait = time.Second
			}
			if progressed {
				continue
			}
			if wait <= 0 || wait > 5*time.Second {
				wait = 5 * time.Second // safety net: look at the head again
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-e.wake:
			case <-t.C:
			}
			t.Stop()
		}
	}, nil)
}

// Step executes the head if it is due. It reports whether a message moved,
// and otherwise how long until the head is due.
//
// Before a head executes, proc_state.executing_by names this engine's
// instance (R-H1). The marker is normally written, for the next head, by
// the transaction that finishes the previous one (markNext), so the normal
// path commits nothing extra; only a head that no such transaction marked
// — the first one after a start, after idle or after a backoff — gets a
// transaction of its own (markHead). A head found carrying another
// instance's marker was being executed when that instance's process ended
// (panic outside the handler, out-of-memory kill, liveness kill, SIGKILL):
// that execution counts as a failed attempt, with backoff and max-attempts
// like any other (recordCrash) — unless the instance withdraws the marker
// within MarkerGrace, which a live instance does when its term ends
// (withdrawMarkers): an outage or a lease handover is never charged to the
// message (R-L2).
func (e *Engine) Step(ctx context.Context) (progressed bool, wait time.Duration, err error) {
	defer func() {
		if err != nil {
			// The database did not answer, or the term is over: no message
			// could run, so the head's clock stops (R-L2), and a marker
			// grace starts again.
			e.runningSince = time.Time{}
			e.foreign = foreignMarker{}
		}
	}()
	heads, replays, err := e.loadHeads(ctx, e.batchSize())
	if err != nil {
		return false, time.Second, err // the database is unreachable: pause, burn nothing
	}
	if replays { // operators' replays first (R-F1): they may reopen messages below the head
		if _, err := e.applyReplays(ctx); err != nil {
			return false, time.Second, err
		}
		if heads, _, err = e.loadHeads(ctx, e.batchSize()); err != nil {
			return false, time.Second, err
		}
	}
	if len(heads) == 0 {
		return false, 0, nil
	}
	h := heads[0]
	now := e.clock.Now()
	if e.runningSince.IsZero() {
		e.runningSince = now
	}
	if h.ExecutingBy != nil && *h.ExecutingBy != e.instance {
		forgiven, err := e.crashedRun(ctx, h)
		if err != nil || forgiven {
			return e.settle(ctx, h, err)
		}
		if wait := e.markerGraceLeft(h, now); wait > 0 {
			// Its instance may be alive and withdraw it: look again soon.
			// Meanwhile the head cannot run, so its clock stops (R-L2).
			e.runningSince = time.Time{}
			return false, min(wait, markerPoll), nil
		}
		return e.settle(ctx, h, e.recordCrash(ctx, h))
	}
	if h.State == StateFailed && h.NextAttemptAt != nil && h.NextAttemptAt.After(now) {
		return false, h.NextAttemptAt.Sub(now), nil
	}
	// Poison: too many attempts, or stuck too long at the head (R-B5).
	if h.Attempts >= e.opt.MaxAttempts {
		return e.settle(ctx, h, e.finishNonBusiness(ctx, h.MsgID, nil, StateDead, ClassExhausted,
			fmt.Sprintf("gave up after %d attempts (last: %s)", h.Attempts, deref(h.ErrorClass))))
	}
	if e.headExpired(h, now) {
		return e.settle(ctx, h, e.finishNonBusiness(ctx, h.MsgID, nil, StateDead, ClassExhausted,
			fmt.Sprintf("head for longer than %s (last: %s)", e.opt.HeadDeadline, deref(h.ErrorClass))))
	}
	// Every message decide handles runs as a batch, one message being a
	// batch of one (batch.go); the kinds with their own transaction rules
	// run below.
	start := time.Now()
	progressed, ran, own, err := e.stepBatch(ctx, heads)
	if ran {
		return progressed, 0, err
	}
	// The head was marked and decoded by stepBatch, its execution span
	// (R-I4) started there.
	err = e.execute(own.ctx, own)
	own.x.end(err)
	e.metrics.duration.Record(ctx, time.Since(start).Seconds())
	if err != nil && ctx.Err() != nil {
		// Stopping, not failing: withdraw the marker so that the next
		// start does not count this execution as one that ended the
		// process. A term that lost its lease cannot write it any more;
		// the next holder then counts the attempt.
		e.unmark(ctx, h.MsgID)
		return false, 0, err
	}
	return e.charge(ctx, h, err)
}

// headsSQL reads the first $1 open messages at or above the floor $2, as
// long as the raw texts before each stay under $4 bytes (the first message
// is always read): a FIFO of large messages — a backlog of daily
// snapshots, up to the 10 MB message limit each — would otherwise load a
// whole batch of them, gigabytes, to execute one (R-J4). The raw of
// message $3, the daily snapshot whose reading the engine keeps between
// its steps (snapshot_memo.go), is not sent again at each step.
const headsSQL = `
	SELECT msg_id, state, attempts, next_attempt_at, processing_started_at, error_class,
		CASE WHEN msg_id = $3 THEN NULL ELSE raw END, executing_by, executing_through, trace_parent, trace_state
	FROM (
		SELECT p.*, sum(octet_length(p.raw)) OVER (ORDER BY p.msg_id) - octet_length(p.raw) AS raw_before
		FROM proc_state p WHERE p.state IN ('PENDING', 'FAILED') AND p.msg_id >= $2 ORDER BY p.msg_id LIMIT $1
	) h
	WHERE raw_before < $4 ORDER BY msg_id`

// headsRawBudget is $4 of headsSQL: a step reads at most about this much
// raw text beyond its first message. A batch of 1,024 FLOPs of a few
// kilobytes each stays within it.
const headsRawBudget = 8 << 20

// loadHeads returns up to n open messages from the FIFO head, in order,
// reading from the head floor (floor.go) and raising it to the head, and
// whether a replay request is pending (applyReplays): both reads go in one
// pipelined round trip, the executor's only one per step before its
// batch's (R-M2). It keeps the floor's generation for the raises of the
// writes that follow.
func (e *Engine) loadHeads(ctx context.Context, n int) (heads []*head, replays bool, err error) {
	if p := e.prefetched; p != nil {
		e.prefetched = nil
		// Read with the last batch's COMMIT (prefetchHeads) in this term.
		// An empty read is not taken: messages registered since then wait
		// behind no batch, so the step reads for itself.
		if len(p.heads) > 0 && p.term == e.db.Term() {
			e.floorGen = p.gen
			e.floor.raise(p.heads[0].MsgID, p.gen)
			return p.heads, p.replays, nil
		}
	}
	floor, gen := e.floor.read()
	e.floorGen = gen
	b := &pgx.Batch{}
	var read headsRead
	e.queueHeads(b, n, floor, &read)
	if err := e.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, fmt.Errorf("loading FIFO head: %w", err)
	}
	if len(read.heads) > 0 {
		e.floor.raise(read.heads[0].MsgID, gen)
	}
	return read.heads, read.replays, nil
}

// headsRead is what loadHeads reads: the heads and the replay flag, and,
// when read ahead with a batch's COMMIT, the floor generation it was read
// at.
type headsRead struct {
	heads   []*head
	replays bool
	gen     uint64
	term    *lease.Term // of the batch that read them ahead
}

// queueHeads queues loadHeads' two reads, up to n heads from floor, into
// r.
func (e *Engine) queueHeads(b *pgx.Batch, n int, floor int64, r *headsRead) {
	kept, keptRaw := e.snapshots.kept()
	b.Queue(replaysPendingSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&r.replays) })
	b.Queue(headsSQL, n, floor, kept, headsRawBudget).Query(func(rows pgx.Rows) (err error) {
		r.heads, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*head, error) {
			var h head
			var raw *string
			err := row.Scan(&h.MsgID, &h.State, &h.Attempts, &h.NextAttemptAt, &h.ProcessingStartedAt, &h.ErrorClass, &raw, &h.ExecutingBy, &h.ExecutingThrough, &h.TraceParent, &h.TraceState)
			if raw != nil {
				h.Raw = *raw
			} else {
				h.Raw = keptRaw // proc_state.raw never changes once registered
			}
			return &h, err
		})
		return err
	})
}

// prefetchHeads queues, on a batch's transaction tx, the next step's
// heads from above the batch's last message (through), read after its
// COMMIT in the same round trip (lease.ReadAfterCommit): a step after a
// batch then reads nothing before its own (R-M2). The reads see the
// marker the hand-over wrote. done reports, once the transaction ended,
// what was read, nil when nothing was (the transaction did not commit, or
// could not take the reads): the next step reads for itself.
func (e *Engine) prefetchHeads(tx pgx.Tx, through int64) (done func() *headsRead) {
	floor, gen := e.floor.read()
	r := &headsRead{gen: gen, term: e.db.Term()}
	var read bool
	b := &pgx.Batch{}
	e.queueHeads(b, e.batchSize(), max(floor, through+1), r)
	b.QueuedQueries[len(b.QueuedQueries)-1].Fn = wrapRead(b.QueuedQueries[len(b.QueuedQueries)-1].Fn, &read)
	if !lease.ReadAfterCommit(tx, b) {
		return func() *headsRead { return nil }
	}
	return func() *headsRead {
		if !read {
			return nil
		}
		return r
	}
}

// wrapRead is fn that sets *ok when it succeeds.
func wrapRead(fn func(pgx.BatchResults) error, ok *bool) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		err := fn(br)
		*ok = err == nil
		return err
	}
}

// crashedRun handles a head carrying another instance's marker for a
// batch (executing_through past the head; or, as an older release marked a
// batch, several messages carrying that marker): the instance died inside
// a batch (batch.go), and which message, if any, ended it is unknown.
// Counting an attempt for each would charge innocent neighbours, and at
// max-attempts crashes exhaust them all; so none is counted, the marker is
// withdrawn, and the messages up to the batch's last run one at a time
// (singleUntil). If one of them ends the process again, it is then the
// only one marked, and the next start counts that crash against it alone
// (recordCrash); from then on it is a retry, which always runs alone
// (prepareBatch), so each later crash is counted too. The price is one
// crash more before a poison message of a batch is charged: it ends
// DEAD(EXHAUSTED) after max-attempts + 1 process deaths. It reports
// whether it handled the run; a single message's marker is left to
// recordCrash.
func (e *Engine) crashedRun(ctx context.Context, h *head) (bool, error) {
	by := *h.ExecutingBy
	last := h.MsgID
	if h.ExecutingThrough != nil {
		last = max(last, *h.ExecutingThrough)
	}
	var n int
	var marked int64
	err := e.pool.QueryRow(ctx, `SELECT count(*), COALESCE(max(msg_id), 0) FROM proc_state
		WHERE state IN ('PENDING', 'FAILED') AND executing_by = $1 AND msg_id >= $2`, by, h.MsgID).Scan(&n, &marked)
	if err != nil {
		return false, fmt.Errorf("reading crashed batch: %w", err)
	}
	if last == h.MsgID && n <= 1 {
		return false, nil
	}
	last = max(last, marked)
	if err := e.inTx(ctx, func(tx pgx.Tx) error { return procstate.ReleaseFrom(ctx, tx, by, h.MsgID) }); err != nil {
		return false, err
	}
	e.singleUntil = max(e.singleUntil, last)
	e.metrics.crashed.Add(ctx, 1)
	e.log.Error("a batch's execution ended its process; its messages run one at a time, a crash of one of them is counted against it",
		"executing_by", clip.N(by, 256), "first_msg_id", h.MsgID, "last_msg_id", last, "alert", "processor-crashed-execution")
	return true, nil
}
