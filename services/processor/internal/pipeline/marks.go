package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/backoff"
	"msgexchange/libs/lease"
	"msgexchange/services/internal/procstate"
)

// markHead writes this instance's execution marker on a head that no
// finishing transaction marked, and its processing start if it has none,
// in a transaction of its own, before the head executes (R-H1). It is not
// synchronously committed: the marker guards against the death of the
// processor, not of PostgreSQL, and any later synchronous commit (the
// execution's outcome) makes it durable with itself. A PostgreSQL crash
// that loses it also ends the execution it announced, which then counts
// as an outage, not an attempt.
func (e *Engine) markHead(ctx context.Context, msgID int64) error {
	return e.claim(ctx, procstate.Claim{Head: msgID}, fmt.Errorf("marking head %d executing: %w", msgID, ErrNotOpen))
}

// claim writes c for this instance, withdrawing its previous marker, in a
// transaction of its own; refused is the error when the head is no
// longer open.
func (e *Engine) claim(ctx context.Context, c procstate.Claim, refused error) error {
	c.Instance, c.At, c.Previous = e.instance, e.clock.Now(), e.marked
	// The claim's statement checks itself, so it travels with the fence and
	// COMMIT: one round trip (R-M2).
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		procstate.QueueClaim(b, c)
		return lease.SendAtCommit(ctx, tx, b)
	})
	if procstate.Checked(err) {
		return refused
	}
	if err != nil {
		return fmt.Errorf("claiming message %d for execution: %w", c.Head, err)
	}
	e.marked = c.Head
	if c.Through != 0 {
		e.marked = 0 // a batch's marker is withdrawn by the statements that finish it
	}
	return nil
}

// markNextSQL is the statement of markNext (procstate.HandOverSQL).
const markNextSQL = procstate.HandOverSQL

// markNext hands the execution marker, inside a transaction that finished
// (or moved) msgID, to the head that follows — the smallest open message,
// if it is due now — and sets its processing start if it has none (R-H1).
// It clears this instance's previous marker. It reports the message it
// marked (0 for none) and whether msgID itself is still open.
func (e *Engine) markNext(ctx context.Context, tx pgx.Tx, msgID int64) (next int64, open bool, err error) {
	return procstate.WriteHandOver(ctx, tx, e.handOver(msgID))
}

// handOver is markNext's hand-over from msgID, for a batch that queues it
// with its other statements (flushBatch).
func (e *Engine) handOver(msgID int64) procstate.HandOver {
	floor, _ := e.floor.read()
	return procstate.HandOver{From: msgID, Instance: e.instance, At: e.clock.Now(), Previous: e.marked, Floor: floor, Ahead: e.ahead(msgID)}
}

// ahead is the batch the executor would run from the head after msgID,
// for the hand-over to mark (procstate.HandOver.Ahead): none while the
// messages after a crashed batch run one at a time (singleUntil), the
// narrowed size while a rolled-back batch is searched (narrowUntil).
func (e *Engine) ahead(msgID int64) int {
	switch {
	case msgID < e.singleUntil:
		return 0
	case msgID < e.narrowUntil:
		return e.narrowTo
	}
	return e.batchSize()
}

// finishTx runs fn — a write that finishes msgID or moves it on — in a
// fenced transaction that ends with markNext, so the next head is marked
// without a commit of its own. When fn reports that it kept msgID open (a
// snapshot batch), msgID must still be open at the end — an operator may
// have ended it meanwhile (R-H3) — or the transaction rolls back with
// ErrNotOpen.
func (e *Engine) finishTx(ctx context.Context, msgID int64, fn func(pgx.Tx) (keptOpen bool, err error)) error {
	var next int64
	var closed bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		keptOpen, err := fn(tx)
		if err != nil {
			return err
		}
		n, open, err := e.markNext(ctx, tx, msgID)
		if err != nil {
			return err
		}
		if keptOpen && !open {
			return fmt.Errorf("continuing %d: %w", msgID, ErrNotOpen)
		}
		next, closed = n, !open
		return nil
	})
	if err == nil {
		e.marked = next
		if closed {
			// msgID was the head: nothing below it is open.
			e.floor.raise(msgID+1, e.floorGen)
		}
	}
	return err
}

// unmark withdraws this instance's marker from msgID after an execution
// that was cut short by stopping, not by a failure of the message. It is
// best effort and bounded: a marker left behind costs the message one
// attempt at the next start.
func (e *Engine) unmark(ctx context.Context, msgID int64) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := e.inTx(uctx, func(tx pgx.Tx) error { return procstate.Unclaim(uctx, tx, e.instance, msgID) })
	if err != nil {
		e.log.Warn("withdrawing execution marker on stop; the next start counts the attempt", "msg_id", msgID, "err", err)
		return
	}
	e.marked = 0
}

// headExpired reports whether h has been at the head for head-deadline
// (R-B5) — counting only time in which it could run (R-L2): from its
// processing start, or from when this engine last began to be able to run
// the head (its term's first step, the first step after the database came
// back), whichever is later. An outage of PostgreSQL or of the lease, and
// a lease handover, never spend a healthy head's deadline: after any of
// them the head gets head-deadline again, while its attempts still bound a
// message that keeps failing.
func (e *Engine) headExpired(h *head, now time.Time) bool {
	if h.ProcessingStartedAt == nil {
		return false
	}
	from := *h.ProcessingStartedAt
	if e.runningSince.After(from) {
		from = e.runningSince
	}
	return now.Sub(from) >= e.opt.HeadDeadline
}

// DefaultMarkerGrace is the default of Options.MarkerGrace: several times
// the longest wait between a live instance's tries to withdraw its markers
// (withdrawRetry), so that an instance that lost its term in an outage has
// answered before its execution is counted as one that ended its process.
const DefaultMarkerGrace = 5 * time.Second

// withdrawRetry is how a live instance whose term ended retries taking its
// markers off while PostgreSQL does not answer.
var withdrawRetry = backoff.Schedule{First: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.DefaultJitter}

// markerPoll is how often the executor looks whether another instance's
// marker on the head was withdrawn while it waits out MarkerGrace.
const markerPoll = 200 * time.Millisecond

// markerGraceLeft reports how long the head h, carrying another instance's
// marker, still waits for that instance to withdraw it. A marker is proof
// that an execution began, not that the process running it ended: an
// instance whose term ended in an outage of PostgreSQL or of the control
// plane, or by a handover, is alive and takes its markers off as soon as
// PostgreSQL answers it (withdrawMarkers). The grace counts from when this
// engine first saw the marker since it last could not reach the database
// (Step forgets it then), so an outage during the grace starts it again.
func (e *Engine) markerGraceLeft(h *head, now time.Time) time.Duration {
	f := foreignMarker{msgID: h.MsgID, by: *h.ExecutingBy, seen: now}
	if e.foreign.msgID != f.msgID || e.foreign.by != f.by {
		e.foreign = f
	}
	return e.foreign.seen.Add(orDefault(e.opt.MarkerGrace, DefaultMarkerGrace)).Sub(now)
}

// withdrawMarkers takes this instance's execution markers off every open
// message once its term's loops have stopped, retrying while PostgreSQL
// does not answer, before the instance campaigns again. A term that ends
// in an outage leaves the marker of an execution it could not finish, and
// of the head markNext marked ahead; the next holder would count each as
// an execution that ended its process (R-H1), so five handovers in an
// outage would poison a healthy message. Without a term the write is not
// fenced, and needs no fence: it touches only this instance's markers, and
// this instance executes nothing between terms. When the process stops
// (ctx done) it makes one last bounded try.
func (e *Engine) withdrawMarkers(ctx context.Context) {
	b := withdrawRetry.Start()
	for {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := e.withdraw(wctx)
		cancel()
		if err == nil {
			e.marked = 0
			return
		}
		if ctx.Err() != nil {
			e.log.Warn("withdrawing execution markers on stop failed; the next holder counts the execution after its grace",
				"instance", e.instance, "err", err)
			return
		}
		wait := b.Next()
		e.log.Warn("withdrawing execution markers after the term; retrying", "instance", e.instance, "err", err, "retry_in", wait)
		if backoff.Sleep(ctx, wait) != nil {
			return
		}
	}
}
