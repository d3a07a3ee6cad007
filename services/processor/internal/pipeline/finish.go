package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/libs/lease"
	"msgexchange/services/internal/procstate"
)

// recordCrash counts the execution of h that another instance announced
// and never finished: its process ended while it ran (R-H1).
func (e *Engine) recordCrash(ctx context.Context, h *head) error {
	e.metrics.crashed.Add(ctx, 1)
	reason := fmt.Sprintf("execution by %s ended its process before recording an outcome (panic outside the handler, out-of-memory, liveness kill or SIGKILL)",
		clip.N(*h.ExecutingBy, 256))
	e.log.Error("previous execution of the head ended its process; counted as a failed attempt",
		"msg_id", h.MsgID, "executing_by", clip.N(*h.ExecutingBy, 256), "attempt", h.Attempts+1, "max_attempts", e.opt.MaxAttempts,
		"alert", "processor-crashed-execution")
	return e.recordFailure(ctx, h, ClassInfra, reason)
}

// recordFailure moves the head to FAILED with backoff, or to
// DEAD(EXHAUSTED) when this was its last allowed attempt; it withdraws the
// head's execution marker in the same transaction, so a failure is counted
// once. A head an operator ended meanwhile is left as it is (ErrNotOpen).
func (e *Engine) recordFailure(ctx context.Context, h *head, class, reason string) error {
	attempts := h.Attempts + 1
	reason = clip.Text(reason)
	if attempts >= e.opt.MaxAttempts {
		err := e.finishTx(ctx, h.MsgID, func(tx pgx.Tx) (bool, error) {
			return false, e.finish(ctx, tx, procstate.Finish{MsgID: h.MsgID, State: StateDead, Class: ClassExhausted,
				Reason: fmt.Sprintf("gave up after %d attempts (last %s: %s)", attempts, class, reason), Attempts: attempts})
		})
		if err == nil {
			e.metrics.failed.Add(ctx, 1, classAttr(class))
		}
		return err
	}
	now := e.clock.Now()
	next := now.Add(e.opt.Retry.Delay(attempts))
	err := e.finishTx(ctx, h.MsgID, func(tx pgx.Tx) (bool, error) {
		n, err := procstate.WriteFails(ctx, tx, procstate.Fail{MsgID: h.MsgID, Class: class, Reason: reason, Attempts: attempts, Next: next, At: now})
		if err != nil {
			return false, err
		}
		if n == 0 {
			return false, fmt.Errorf("recording failure of %d: %w", h.MsgID, ErrNotOpen)
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	e.metrics.failed.Add(ctx, 1, classAttr(class))
	e.log.Warn("message failed; will retry", "msg_id", h.MsgID, "class", class, "reason", reason, "attempt", attempts, "next_attempt_at", next)
	return nil
}

// finishNonBusiness writes a terminal state that touches no business table
// (DEAD, SKIPPED) together with its backfill intent in one statement
// (INV-8), and hands the execution marker to the next head.
func (e *Engine) finishNonBusiness(ctx context.Context, msgID int64, meta *metaCols, state, class, reason string) error {
	return e.finishTx(ctx, msgID, func(tx pgx.Tx) (bool, error) {
		return false, e.finishIn(ctx, tx, msgID, meta, state, class, reason)
	})
}

// finishIn writes a terminal state inside a given transaction: the outbox
// row for the mailbox marker is inserted by the same statement that makes
// the state terminal (INV-8). The reason, often quoting the message, is
// clipped (R-H2). A message that ends DEAD or SKIPPED applied nothing, so
// it gives up the identity it bound in this transaction (R-K3): a forged
// or rejected message never suppresses the genuine one that comes later.
func (e *Engine) finishIn(ctx context.Context, q procstate.DB, msgID int64, meta *metaCols, state, class, reason string) error {
	f := procstate.Finish{MsgID: msgID, State: state, Class: class, Reason: reason}
	if meta != nil {
		f.Meta = *meta
	}
	return e.finish(ctx, q, f)
}

// finish writes f, at now, and reports it.
func (e *Engine) finish(ctx context.Context, q procstate.DB, f procstate.Finish) error {
	f.At = e.clock.Now()
	n, err := procstate.WriteFinish(ctx, q, f)
	if err != nil {
		return fmt.Errorf("writing terminal state %s: %w", f.State, err)
	}
	if n == 0 {
		return fmt.Errorf("writing terminal state %s for %d: %w", f.State, f.MsgID, ErrNotOpen)
	}
	e.metrics.finished.Add(ctx, 1, stateAttr(f.State))
	reason := clip.Text(f.Reason)
	if f.State == StateDead {
		e.reportDead(ctx, f.MsgID, f.Class, reason, flightAttrs(ctx)...)
		return nil
	}
	e.log.InfoContext(ctx, "message finished", append([]any{"msg_id", f.MsgID, "state", f.State, "class", f.Class, "reason", reason}, flightAttrs(ctx)...)...)
	return nil
}

// settle turns the result of a write of the executor into Step's result.
func (e *Engine) settle(ctx context.Context, h *head, err error) (bool, time.Duration, error) {
	switch {
	case err == nil:
		return true, 0, nil
	case ctx.Err() != nil, errors.Is(err, lease.ErrFenced):
		// Stopping, or the term is over (R-H6): nothing more is written.
		return false, 0, err
	case errors.Is(err, ErrNotOpen):
		// An operator ended the message while it executed (R-H3): its
		// transaction rolled back, the operator's outcome stands, and the
		// pipeline moves on without recording a failure.
		e.log.Info("message was finished elsewhere while executing; its execution is discarded",
			"msg_id", h.MsgID, "err", err)
		return true, 0, nil
	case isOutage(err):
		// The processor's own database is unreachable: that says nothing
		// about the message, so no attempt is burnt; the pipeline pauses
		// and the head is tried again (R-B3).
		return false, time.Second, err
	}
	return false, time.Second, err
}

// charge settles an execution of h that ended with err: a retryable
// failure counts its attempt with backoff; so does an error inside the
// transaction that is not a domain outcome and not an outage (R-B3 INFRA).
func (e *Engine) charge(ctx context.Context, h *head, err error) (bool, time.Duration, error) {
	var fail *failure
	if errors.As(err, &fail) {
		return e.settle(ctx, h, e.recordFailure(ctx, h, fail.class, fail.reason))
	}
	if err != nil && !isOutage(err) && !errors.Is(err, ErrNotOpen) && !errors.Is(err, lease.ErrFenced) {
		err = e.recordFailure(ctx, h, ClassInfra, err.Error())
	}
	return e.settle(ctx, h, err)
}
