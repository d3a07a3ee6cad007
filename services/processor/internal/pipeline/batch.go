package pipeline

// What the executor does per batch (pipeline.batch > 1, R-J1). The one
// message path (Step → execute) stays the reference: a batch is a run of
// consecutive due heads whose outcome is, message by message, what that
// path gives, written in one fenced transaction instead of one each.
//
//  1. prepare (no database): up to pipeline.batch open messages from the
//     head, in msg_id order. Each is decoded and classified under the
//     panic guard. Raw missing or MALFORMED, an ignored TYPE, a codec
//     refusal (CODEC_ERROR) and an UNSUPPORTED classification are terminal
//     outcomes decided here (the last two parked, R-K2), like
//     the one message path decides them before any write. A head that
//     failed before (a retry) runs alone, so that a crash during it is
//     its own. The batch ends before the first message that is FAILED,
//     carries an execution marker of its own, is at its limits (attempts,
//     head deadline), whose decoding needs a retry (a panic),
//     or that decide does not handle (daily snapshots with their own
//     batch rules R-C6, season schedules, answers to requests): that
//     message becomes the next head and runs alone.
//  2. mark (R-H1): one small statement, not synchronously committed,
//     marks the batch on its head: executing_by names this instance,
//     executing_through the batch's last message. A process that dies
//     before the batch commits leaves that marker; see crashedRun for how
//     the next start treats it (nobody is charged, the range runs one at
//     a time).
//  3. one fenced transaction: lock the batch's proc_state rows, load the
//     identity holders of their keys and every flight the messages name
//     with its code-share children (one pipelined round trip); then decide
//     each message in order against an overlay (apply.Overlay) — the
//     loaded rows plus the changes of the batch's earlier messages —
//     binding its identity first
//     (a key held by another message, in the database or earlier in the
//     batch, is SKIPPED duplicate-of, R-B4). A rejection, a skip or an
//     unsupported outcome rolls the overlay back to where the message
//     started (the savepoint of the one message path) and keeps only its
//     terminal state, without the identity: a message that applied nothing
//     reserves no key (R-K3). A retryable failure (or a panic) of a handler ends
//     the batch before that message: the overlay is rolled back to it and
//     it runs alone next, where its attempt is counted with backoff.
//  4. write, pipelined in one round trip: the decision's statements,
//     queued by apply (Overlay.Queue) — each changed flight once at its
//     last state, every outbox row in decision order (flight-state, msg,
//     schd per change, the mailbox intent of each terminal state),
//     pending projections, reference-data writes in order — then the
//     FIFO head's own: terminal states and APPLIED states with their
//     identity bindings (one row version per message), and the marker
//     handed to the next head (markNext), which also clears the batch's.
//
// A statement that fails rolls the whole batch back; the executor then
// runs the messages of that batch one at a time (singleUntil), so the
// culprit is found and charged alone.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/lease"
	"msgexchange/services/internal/procstate"
	"msgexchange/services/processor/internal/decide"
)

// DefaultBatch is pipeline.batch when Options.Batch is 0 in the service's
// configuration (chosen by measurement, docs/performance.md R-J1).
const DefaultBatch = 256

// batchSize is the configured batch; 0 or 1 is one message per
// transaction.
func (e *Engine) batchSize() int {
	return max(e.opt.Batch, 1)
}

// stepBatch runs a batch from heads (loaded in msg_id order, the head due
// and not poisoned). ok is false when no batch was run and the one
// message path should handle the head.
func (e *Engine) stepBatch(ctx context.Context, heads []*head) (progressed bool, ok bool, err error) {
	msgs := e.prepareBatch(ctx, heads)
	if len(msgs) < 2 {
		for _, m := range msgs {
			m.x.end(errBatchEmpty)
		}
		return false, false, nil // one message: the one message path is the same and simpler
	}
	endAll := func(err error) {
		for _, m := range msgs {
			m.x.end(err)
		}
	}
	start := time.Now()
	if err := e.markBatch(ctx, msgs); err != nil {
		endAll(err)
		if errors.Is(err, errBatchChanged) {
			return false, false, nil
		}
		p, _, err := e.settle(ctx, heads[0], err)
		return p, true, err
	}
	done, next, err := e.writeBatch(ctx, msgs)
	if err != nil {
		endAll(err)
		switch {
		case ctx.Err() != nil:
			e.unmarkBatch(ctx, msgs)
			return false, true, err
		case errors.Is(err, lease.ErrFenced), isOutage(err):
			p, _, err := e.settle(ctx, heads[0], err)
			return p, true, err
		}
		// The markers of the batch are withdrawn, so that the messages
		// run next as if the batch had not been tried.
		if rerr := e.restoreMarks(ctx, msgs); rerr != nil {
			p, _, err := e.settle(ctx, heads[0], rerr)
			return p, true, err
		}
		if errors.Is(err, errBatchEmpty) || errors.Is(err, errBatchChanged) {
			return false, false, nil
		}
		// A statement failed: run these messages one at a time, so that
		// the one at fault is charged alone (R-J1).
		e.singleUntil = msgs[len(msgs)-1].h.MsgID
		e.log.Warn("batch rolled back; its messages run one at a time", "first_msg_id", msgs[0].h.MsgID,
			"last_msg_id", e.singleUntil, "messages", len(msgs), "err", err)
		return true, true, nil
	}
	e.marked = next
	e.batched += len(done)
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
	return true, true, nil
}

// prepareBatch decodes and classifies the batch's messages (step 1): the
// run of heads that can be decided together, each with its terminal
// outcome when one is decided before any write.
func (e *Engine) prepareBatch(ctx context.Context, heads []*head) []*batchMsg {
	now := e.clock.Now()
	var out []*batchMsg
	for i, h := range heads {
		if i > 0 && (h.State != StatePending || h.ExecutingBy != nil || h.Attempts >= e.opt.MaxAttempts || e.headExpired(h, now)) {
			break
		}
		// A retry runs alone, so that a crash during its next attempt is
		// its own and counted (crashedRun).
		if i == 0 && ((h.ExecutingBy != nil && *h.ExecutingBy != e.instance) || h.Attempts > 0) {
			break
		}
		ectx, x := e.startExecution(ctx, h)
		m := &batchMsg{h: h, ctx: ectx, x: x}
		if !e.prepareOne(m) {
			x.end(errBatchEmpty)
			break
		}
		out = append(out, m)
	}
	return out
}

// prepareOne decodes and classifies one message; false means it cannot
// be part of a batch (its decoding needs a retry, or decide does not
// handle it).
func (e *Engine) prepareOne(m *batchMsg) bool {
	r := e.read(m.ctx, m.h)
	if r.retry != nil {
		return false
	}
	m.msg, m.meta, m.cls = r.msg, r.meta, r.cls
	if r.state != "" {
		m.state, m.class, m.reason, m.parked = r.state, r.class, r.reason, r.parked
		if r.parked {
			m.reason = parkedReason(r.class, r.reason)
		}
		return true
	}
	return decide.Handles(m.msg, m.cls)
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
