package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/lifecycle"
)

// States and error classes of proc_state.
const (
	StatePending   = "PENDING"
	StateApplied   = "APPLIED"
	StateSucceeded = "SUCCEEDED"
	StateSkipped   = "SKIPPED"
	StateFailed    = "FAILED"
	StateDead      = "DEAD"

	ClassMalformed   = "MALFORMED"
	ClassCodec       = "CODEC_ERROR"
	ClassUnsupported = "UNSUPPORTED"
	ClassInfra       = "INFRA"
	ClassProtocol    = "PROTOCOL"
	ClassExhausted   = "EXHAUSTED"
)

// head is the FIFO head: the smallest unfinished mailbox ID (INV-3).
type head struct {
	MsgID               int64
	State               string
	Attempts            int
	NextAttemptAt       *time.Time
	ProcessingStartedAt *time.Time
	ErrorClass          *string
	Raw                 string

	startAt time.Time // processing start to record: the stored one, or this attempt's
}

// started is the processing start to record with the attempt's writes.
func (h *head) started() *time.Time {
	if h.startAt.IsZero() {
		return h.ProcessingStartedAt
	}
	return &h.startAt
}

func (e *Engine) executorService() *lifecycle.Service {
	return lifecycle.NewService("processor-executor", nil, func(ctx context.Context) error {
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
func (e *Engine) Step(ctx context.Context) (progressed bool, wait time.Duration, err error) {
	if _, err := e.applyReplays(ctx); err != nil { // operators' replays first (R-F1)
		return false, time.Second, err
	}
	h, err := e.loadHead(ctx)
	if err != nil {
		return false, time.Second, err // the database is unreachable: pause, burn nothing
	}
	if h == nil {
		return false, 0, nil
	}
	now := e.clock.Now()
	if h.State == StateFailed && h.NextAttemptAt != nil && h.NextAttemptAt.After(now) {
		return false, h.NextAttemptAt.Sub(now), nil
	}
	// Poison: too many attempts, or stuck too long at the head (R-B5).
	if h.Attempts >= e.opt.MaxAttempts {
		return true, 0, e.finishNonBusiness(ctx, h.MsgID, nil, StateDead, ClassExhausted,
			fmt.Sprintf("gave up after %d attempts (last: %s)", h.Attempts, deref(h.ErrorClass)))
	}
	if h.ProcessingStartedAt != nil && now.Sub(*h.ProcessingStartedAt) >= e.opt.HeadDeadline {
		return true, 0, e.finishNonBusiness(ctx, h.MsgID, nil, StateDead, ClassExhausted,
			fmt.Sprintf("head for longer than %s (last: %s)", e.opt.HeadDeadline, deref(h.ErrorClass)))
	}
	// The head's first processing start is written with whatever the
	// attempt writes — its outcome, or its failure — not by a transaction of
	// its own: one durable commit per message instead of two.
	if h.ProcessingStartedAt == nil {
		h.startAt = now
	} else {
		h.startAt = *h.ProcessingStartedAt
	}
	start := time.Now()
	err = e.execute(ctx, h)
	e.metrics.duration.Record(ctx, time.Since(start).Seconds())
	var fail *failure
	if errors.As(err, &fail) {
		return true, 0, e.recordFailure(ctx, h, fail.class, fail.reason)
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, 0, err
		}
		if isOutage(err) {
			// The processor's own database is unreachable: that says
			// nothing about the message, so no attempt is burnt; the
			// pipeline pauses and the head is tried again (R-B3).
			return false, time.Second, err
		}
		// An error inside the transaction that is not a domain outcome and
		// not an outage: the attempt counts, with backoff (R-B3 INFRA).
		return true, 0, e.recordFailure(ctx, h, ClassInfra, err.Error())
	}
	return true, 0, nil
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

func (e *Engine) loadHead(ctx context.Context) (*head, error) {
	var h head
	err := e.pool.QueryRow(ctx, `
		SELECT msg_id, state, attempts, next_attempt_at, processing_started_at, error_class, raw
		FROM proc_state WHERE state IN ('PENDING', 'FAILED') ORDER BY msg_id LIMIT 1`).
		Scan(&h.MsgID, &h.State, &h.Attempts, &h.NextAttemptAt, &h.ProcessingStartedAt, &h.ErrorClass, &h.Raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading FIFO head: %w", err)
	}
	return &h, nil
}

// failure is a retryable outcome of an execution.
type failure struct {
	class, reason string
}

func (f *failure) Error() string { return f.class + ": " + f.reason }

// recordFailure moves the head to FAILED with backoff, or to
// DEAD(EXHAUSTED) when this was its last allowed attempt.
func (e *Engine) recordFailure(ctx context.Context, h *head, class, reason string) error {
	attempts := h.Attempts + 1
	e.metrics.failed.Add(ctx, 1, classAttr(class))
	if attempts >= e.opt.MaxAttempts {
		_, err := e.exec(ctx, `UPDATE proc_state SET attempts=$2 WHERE msg_id=$1 AND state IN ('PENDING', 'FAILED')`, h.MsgID, attempts)
		if err != nil {
			return fmt.Errorf("recording attempt: %w", err)
		}
		return e.finishNonBusiness(ctx, h.MsgID, nil, StateDead, ClassExhausted,
			fmt.Sprintf("gave up after %d attempts (last %s: %s)", attempts, class, reason))
	}
	now := e.clock.Now()
	next := now.Add(e.backoff(attempts))
	_, err := e.exec(ctx, `
		UPDATE proc_state SET state='FAILED', error_class=$2, reason=$3, attempts=$4, next_attempt_at=$5, updated_at=$6,
			processing_started_at=COALESCE(processing_started_at, $7)
		WHERE msg_id=$1 AND state IN ('PENDING', 'FAILED')`, h.MsgID, class, truncate(reason), attempts, next, now, h.started())
	if err != nil {
		return fmt.Errorf("recording failure: %w", err)
	}
	e.log.Warn("message failed; will retry", "msg_id", h.MsgID, "class", class, "reason", reason, "attempt", attempts, "next_attempt_at", next)
	return nil
}

// truncate bounds a stored reason to 2000 bytes, cutting at a character
// boundary: PostgreSQL refuses text holding a cut UTF-8 sequence.
func truncate(s string) string {
	n := 2000
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// metaCols are the META values written with a state transition.
type metaCols struct {
	SNDR, TYPE, STYP, SEQN, DTTM string
}

// finishNonBusiness writes a terminal state that touches no business table
// (DEAD, SKIPPED) together with its backfill intent in one statement
// (INV-8): the outbox row for the mailbox marker is inserted by the same
// statement that makes the state terminal.
func (e *Engine) finishNonBusiness(ctx context.Context, msgID int64, meta *metaCols, state, class, reason string) error {
	return e.inTx(ctx, func(tx pgx.Tx) error {
		return e.finishIn(ctx, tx, msgID, meta, state, class, reason)
	})
}

// finishIn is finishNonBusiness inside a given transaction or pool.
func (e *Engine) finishIn(ctx context.Context, q querier, msgID int64, meta *metaCols, state, class, reason string) error {
	now := e.clock.Now()
	var m metaCols
	if meta != nil {
		m = *meta
	}
	var cls *string
	if class != "" {
		cls = &class
	}
	tag, err := q.Exec(ctx, `
		WITH u AS (
			UPDATE proc_state SET state=$2, error_class=$3, reason=$4, finished_at=$5, updated_at=$5,
				next_attempt_at=NULL,
				sndr=COALESCE(NULLIF($6, ''), sndr), msg_type=COALESCE(NULLIF($7, ''), msg_type),
				msg_styp=COALESCE(NULLIF($8, ''), msg_styp), seqn=COALESCE(NULLIF($9, ''), seqn),
				dttm=COALESCE(NULLIF($10, ''), dttm)
			WHERE msg_id=$1 AND state IN ('PENDING', 'FAILED', 'APPLIED')
			RETURNING msg_id)
		INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		SELECT 'mailbox', msg_id::text, msg_id, $5, $5 FROM u`,
		msgID, state, cls, truncate(reason), now, m.SNDR, m.TYPE, m.STYP, m.SEQN, m.DTTM)
	if err != nil {
		return fmt.Errorf("writing terminal state %s: %w", state, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("writing terminal state %s for %d: %w", state, msgID, ErrNotOpen)
	}
	e.metrics.finished.Add(ctx, 1, stateAttr(state))
	lvl := e.log.Info
	if state == StateDead {
		lvl = e.log.Warn
	}
	lvl("message finished", "msg_id", msgID, "state", state, "class", class, "reason", reason)
	return nil
}
