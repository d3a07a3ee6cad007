package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
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
