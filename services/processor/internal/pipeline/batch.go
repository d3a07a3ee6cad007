package pipeline

// What the executor does per batch (R-J1). Every message decide handles
// runs here, one message being a batch of one (pipeline.batch 1, a retry,
// the messages of a batch that rolled back): a batch is a run of
// consecutive due heads whose outcome is, message by message, what each
// gives as a batch of one, written in one fenced transaction instead of
// one each. Only the kinds with their own transaction rules run in
// execute.go.
//
//  1. prepare (no database): up to pipeline.batch open messages from the
//     head, in msg_id order. Each is decoded and classified under the
//     panic guard. Raw missing or MALFORMED, an ignored TYPE, a codec
//     refusal (CODEC_ERROR) and an UNSUPPORTED classification are terminal
//     outcomes decided here (the last two parked, R-K2), before any
//     write. A head that failed before (a retry) runs alone, so that a
//     crash during it is its own. The batch ends before the first
//     message that is FAILED,
//     carries an execution marker of its own, is at its limits (attempts,
//     head deadline), whose decoding needs a retry (a panic),
//     or that decide does not handle (daily snapshots with their own
//     batch rules R-C6, season schedules, answers to requests): that
//     message becomes the next head and runs alone (in execute.go for the
//     kinds decide does not handle and a decoding to retry).
//  2. mark (R-H1): the batch is marked on its head — executing_by names
//     this instance, executing_through the batch's last message (none for
//     a batch of one). Usually the transaction that finished the batch
//     before did it, handing the marker to this head through the last of
//     the next pipeline.batch open messages (procstate.HandOver.Ahead);
//     only a head it did not mark, or a batch that grew past that range
//     (messages registered meanwhile), takes one small statement of its
//     own, not synchronously committed, and a head marked for a batch that
//     runs alone is marked again alone. A process that dies before the
//     batch commits leaves that marker; see crashedRun for how the next
//     start treats it (nobody is charged, the range runs one at a time).
//  3. one fenced transaction: lock the batch's proc_state rows, load the
//     identity holders of their keys and every flight the messages name
//     with its code-share children (one pipelined round trip); then decide
//     each message in order against an overlay (apply.Overlay) — the
//     loaded rows plus the changes of the batch's earlier messages —
//     binding its identity first
//     (a key held by another message, in the database or earlier in the
//     batch, is SKIPPED duplicate-of, R-B4). A rejection, a skip or an
//     unsupported outcome rolls the overlay back to where the message
//     started (a savepoint) and keeps only its
//     terminal state, without the identity: a message that applied nothing
//     reserves no key (R-K3). A retryable failure (or a panic) of a handler ends
//     the batch before that message: the overlay is rolled back to it and
//     it runs first next; failing as the first, it writes nothing and its
//     attempt is counted with backoff (charge), as is a failing statement
//     of a batch of one. A failure a retry would repeat is parked (R-K2).
//  4. write, pipelined in one round trip: the decision's statements,
//     queued by apply (Overlay.Queue) — each changed flight once at its
//     last state, pending projections, reference-data writes in order —
//     then the FIFO head's own, written by procstate: the terminal states
//     with every outbox row in decision order (flight-state, msg, schd
//     per change, the mailbox intent of each terminal state in its place)
//     in one statement, APPLIED states, both with their identity
//     bindings (one row version per message), and the marker handed to
//     the next head (markNext), which also clears the batch's — with the
//     fence and COMMIT (lease.SendAtCommit): each statement checks in SQL
//     what the commit depends on (msgx_check). Behind COMMIT, in the same
//     round trip, go the next step's reads of the FIFO head and the replay
//     flag (prefetchHeads), which that step takes instead of reading — if
//     it runs in the same term and they found a head. A batch after a
//     batch thus costs two round trips: the loads, and the writes with
//     COMMIT.
//
// A statement that fails rolls the whole batch back; the executor then
// runs the messages of that batch again in batches of half the size,
// halving at each rollback and doubling at each commit (narrowTo), so the
// culprit is found in about log2(batch) transactions and charged alone.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/lease"
	"msgexchange/services/internal/procstate"
	"msgexchange/services/processor/internal/decide"
)

// DefaultBatch is pipeline.batch when Options.Batch is 0 in the service's
// configuration (chosen by measurement, docs/performance.md R-J1).
const DefaultBatch = 1024

// stepBatch runs a batch from heads (loaded in msg_id order, the head due
// and not poisoned); one message is a batch of one. ok is false when no
// batch was run: the head, decoded in own with its execution started, has
// its own transaction rules (execute).
func (e *Engine) stepBatch(ctx context.Context, heads []*head) (progressed bool, ok bool, own *batchMsg, err error) {
	h := heads[0]
	// The head is marked before it is decoded (R-H1): a process that dies
	// decoding it, or deciding it, leaves the marker that counts the
	// attempt (recordCrash).
	if h.ExecutingBy == nil {
		if err := e.markHead(ctx, h.MsgID); err != nil {
			p, _, err := e.settle(ctx, h, err)
			return p, true, nil, err
		}
		h.ExecutingBy = &e.instance
	}
	start := time.Now()
	msgs, own, retry := e.prepareBatch(ctx, heads)
	if retry != nil {
		// Its decoding failed: the attempt counts, as for any message.
		e.metrics.duration.Record(ctx, time.Since(start).Seconds())
		p, _, err := e.charge(ctx, h, retry)
		return p, true, nil, err
	}
	single := own != nil || len(msgs) == 1
	through := h.ExecutingThrough
	if single && through != nil {
		// The hand-over marked a batch from this head, which runs alone:
		// marked alone, a crash of its run is counted against it
		// (recordCrash), not taken for a batch's (crashedRun).
		if err := e.markHead(ctx, h.MsgID); err != nil {
			if own != nil {
				own.x.end(err)
			}
			for _, m := range msgs {
				m.x.end(err)
			}
			p, _, err := e.settle(ctx, h, err)
			return p, true, nil, err
		}
		h.ExecutingThrough = nil
	}
	if own != nil {
		return false, false, own, nil // a kind with its own transaction rules: execute
	}
	endAll := func(err error) {
		for _, m := range msgs {
			m.x.end(err)
		}
	}
	// A batch is marked on its head with its last message (crashedRun),
	// unless the hand-over that marked the head marked it through the
	// batch's last message already (procstate.HandOver.Ahead).
	if !single && (through == nil || *through < msgs[len(msgs)-1].h.MsgID) {
		if err := e.markBatch(ctx, msgs); err != nil {
			endAll(err)
			if errors.Is(err, errBatchChanged) {
				err = fmt.Errorf("marking head %d executing: %w", h.MsgID, ErrNotOpen)
			}
			p, _, err := e.settle(ctx, h, err)
			return p, true, nil, err
		}
	}
	done, next, stop, err := e.writeBatch(ctx, msgs)
	if err != nil {
		if stop != nil {
			err = stop
		}
		endAll(err)
		switch {
		case ctx.Err() != nil:
			// Stopping, not failing: the marker is withdrawn so that the
			// next start does not count this execution as one that ended
			// the process. A term that lost its lease cannot write it any
			// more; the next holder then counts the attempt.
			e.unmarkBatch(ctx, msgs)
			return false, true, nil, err
		case errors.Is(err, lease.ErrFenced), isOutage(err):
			p, _, err := e.settle(ctx, h, err)
			return p, true, nil, err
		case errors.Is(err, errBatchChanged) && single:
			// An operator ended the message meanwhile (R-H3).
			p, _, err := e.settle(ctx, h, fmt.Errorf("executing %d: %w", h.MsgID, ErrNotOpen))
			return p, true, nil, err
		case single:
			// Its execution failed: the attempt counts, as for any message.
			e.metrics.duration.Record(ctx, time.Since(start).Seconds())
			p, _, err := e.charge(ctx, h, err)
			return p, true, nil, err
		}
		// The markers of the batch are withdrawn, so that the messages
		// run next as if the batch had not been tried.
		if rerr := e.restoreMarks(ctx, msgs); rerr != nil {
			p, _, err := e.settle(ctx, h, rerr)
			return p, true, nil, err
		}
		if stop != nil {
			// The batch's first message failed: its attempt counts.
			p, _, err := e.charge(ctx, h, stop)
			return p, true, nil, err
		}
		// A statement failed, or a message changed meanwhile: run these
		// messages again in batches of half the size, halving again at
		// each rollback, until the one at fault runs alone and is charged
		// alone (R-J1) — a search of about log2(batch) transactions, not
		// one per message of the batch, which with PostgreSQL far away
		// would take minutes (R-M2).
		e.narrowUntil = max(e.narrowUntil, msgs[len(msgs)-1].h.MsgID)
		e.narrowTo = max(len(msgs)/2, 1)
		if !errors.Is(err, errBatchChanged) {
			e.log.Warn("batch rolled back; its messages run again in batches of half the size", "first_msg_id", msgs[0].h.MsgID,
				"last_msg_id", msgs[len(msgs)-1].h.MsgID, "messages", len(msgs), "next_batch", e.narrowTo, "err", err)
		}
		return true, true, nil, nil
	}
	if h.MsgID <= e.narrowUntil {
		// A narrowed batch committed: the next may be twice as large.
		e.narrowTo = min(2*e.narrowTo, e.batchSize())
	}
	e.marked = next
	if !single {
		e.batched += len(done)
	}
	// The batch finished a run of open messages from the head.
	e.floor.raise(done[len(done)-1].h.MsgID+1, e.floorGen)
	per := time.Since(start).Seconds() / float64(len(done))
	for i, m := range msgs {
		if i < len(done) {
			e.metrics.duration.Record(ctx, per)
			e.reportFinished(m)
			m.x.end(nil)
			continue
		}
		m.x.end(errBatchEmpty) // not reached: runs again as the next head
	}
	return true, true, nil, nil
}

// prepareBatch decodes and classifies the batch's messages (step 1): the
// run of heads that can be decided together, each with its terminal
// outcome when one is decided before any write. retry is the head's
// failure when its decoding must be tried again; own is the head, decoded
// and its execution started, when decide does not handle its kind.
//
// The head's execution span starts before its decoding, so that a failed
// decoding is its attempt's; a later message's starts once it joins the
// batch, so that one that ends the batch (it runs as the next head) leaves
// no span of an execution that never was.
func (e *Engine) prepareBatch(ctx context.Context, heads []*head) (out []*batchMsg, own *batchMsg, retry *failure) {
	now := e.clock.Now()
	for i, h := range heads {
		if i > 0 && (h.State != StatePending || h.ExecutingBy != nil || h.Attempts >= e.opt.MaxAttempts || e.headExpired(h, now)) {
			break
		}
		m := &batchMsg{h: h, ctx: ctx}
		if i == 0 {
			m.ctx, m.x = e.startExecution(ctx, h)
		}
		ok, r := e.prepareOne(m)
		switch {
		case i == 0 && r != nil:
			m.x.end(r)
			return nil, nil, r
		case i == 0 && !ok:
			return nil, m, nil
		case !ok:
			return out, nil, nil
		}
		if i > 0 {
			m.ctx, m.x = e.startExecution(ctx, h)
		}
		out = append(out, m)
		// A retry runs alone, so that a crash during its next attempt is
		// its own and counted (crashedRun); so do the messages of a batch
		// that crashed (singleUntil). A batch from within the range of one
		// that rolled back holds at most narrowTo messages.
		if i == 0 && (h.Attempts > 0 || h.MsgID <= e.singleUntil) {
			break
		}
		if heads[0].MsgID <= e.narrowUntil && len(out) >= e.narrowTo {
			break
		}
	}
	return out, nil, nil
}

// prepareOne decodes and classifies one message; false means it cannot
// be part of a batch: its decoding needs a retry (retry), or decide does
// not handle it.
func (e *Engine) prepareOne(m *batchMsg) (ok bool, retry *failure) {
	r := e.read(m.ctx, m.h)
	if r.retry != nil {
		return false, r.retry
	}
	m.msg, m.meta, m.cls = r.msg, r.meta, r.cls
	if r.state != "" {
		m.state, m.class, m.reason, m.parked = r.state, r.class, r.reason, r.parked
		if r.parked {
			m.reason = parkedReason(r.class, r.reason)
		}
		return true, nil
	}
	return decide.Handles(m.msg, m.cls), nil
}

// markBatch marks the batch on its first message (step 2): executing_by
// names this instance, executing_through the batch's last message, and the
// head gets its processing start — one row version for the whole batch,
// in a transaction that is not synchronously committed (see markHead for
// why that suffices). The other messages are not written before they run:
// a crash is recognised as a batch's by the range on its head (crashedRun).
func (e *Engine) markBatch(ctx context.Context, msgs []*batchMsg) error {
	return e.claim(ctx, procstate.Claim{Head: msgs[0].h.MsgID, Through: msgs[len(msgs)-1].h.MsgID}, errBatchChanged)
}

// unmarkBatch withdraws the batch's markers after a batch cut short by
// stopping (see unmark).
func (e *Engine) unmarkBatch(ctx context.Context, msgs []*batchMsg) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.inTx(uctx, func(tx pgx.Tx) error { return procstate.Unclaim(uctx, tx, e.instance, msgs[0].h.MsgID) }); err != nil {
		e.log.Warn("withdrawing batch execution markers on stop; the next start re-runs them one at a time", "err", err)
	}
}

// restoreMarks withdraws the marker of a batch that did not commit and
// the processing start that marking gave its head.
func (e *Engine) restoreMarks(ctx context.Context, msgs []*batchMsg) error {
	h := msgs[0].h
	return e.inTx(ctx, func(tx pgx.Tx) error {
		return procstate.Release(ctx, tx, e.instance, h.MsgID, h.ProcessingStartedAt == nil)
	})
}
