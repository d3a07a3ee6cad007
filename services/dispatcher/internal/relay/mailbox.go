package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/lifecycle"
)

// Marker outcomes (R-D4), recorded in outbox.outcome.
const (
	OutcomeWritten       = "written"
	OutcomeAlreadyMarked = "already-marked"
	OutcomeRowMissing    = "row-missing"
	OutcomeGaveUp        = "gave-up"
	// OutcomeOverdue: the marker kept failing until R
	// (pipeline.overdue-backfill) after its message finished; automatic
	// retries stopped at once, before backfill-max-attempts (INV-7, CLM-4).
	OutcomeOverdue = "overdue"
)

// BackfillAbandoned is proc_state.backfill_outcome of a backfill finished
// without a marker because the mailbox row was missing; a marker recorded
// as written or already-marked stores that outcome.
const BackfillAbandoned = "abandoned"

func (r *Relay) mailboxService() *lifecycle.Service {
	return lifecycle.NewService("dispatcher-mailbox", nil, func(ctx context.Context) error {
		return r.loop(ctx, TargetMailbox, r.DrainMailbox)
	}, nil)
}

// DrainMailbox writes one batch of processed markers. Rows are taken in
// due-time order, so rows in backoff rotate behind fresh ones (fairness).
func (r *Relay) DrainMailbox(ctx context.Context) (bool, error) {
	now := r.opt.Clock.Now()
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := r.reads.Query(qctx, `
		SELECT id, msg_id, attempts, created_at FROM outbox
		WHERE target='mailbox' AND state='PENDING' AND next_attempt_at <= $1
		ORDER BY next_attempt_at, id LIMIT $2`, now, r.opt.Batch)
	if err != nil {
		return false, fmt.Errorf("reading marker intents: %w", err)
	}
	type intent struct {
		id, msgID int64
		attempts  int
		created   time.Time
	}
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (intent, error) {
		var i intent
		return i, row.Scan(&i.id, &i.msgID, &i.attempts, &i.created)
	})
	if err != nil {
		return false, fmt.Errorf("reading marker intents: %w", err)
	}
	// The term must be current before the first marker; each marker is
	// then recorded in a fenced transaction before the next one is written,
	// so the first refusal stops the batch and ends the term (R-H6).
	if len(batch) > 0 {
		if err := r.db(TargetMailbox).Check(ctx); err != nil {
			return false, err
		}
	}
	var lastErr error
	for _, it := range batch {
		outcome, err := r.mark(ctx, it.msgID)
		done := r.opt.Clock.Now()
		if err != nil {
			lastErr = err
			if ctx.Err() != nil {
				return false, nil
			}
			if ferr := r.markFailed(ctx, it.id, it.msgID, it.attempts+1, it.created, err, done); ferr != nil {
				return false, ferr
			}
			continue
		}
		r.markers.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
		if outcome == OutcomeRowMissing {
			// Never treated as marked: abandoned and listed for the operators.
			r.log.Error("mailbox row missing; backfill abandoned", "msg_id", it.msgID, "alert", "backfill-abandoned")
			if err := r.markAbandoned(ctx, it.id, done); err != nil {
				return false, err
			}
			continue
		}
		if err := r.markSent(ctx, it.id, it.msgID, outcome, done); err != nil {
			return false, err
		}
		r.stage(ctx, StageMarked, TargetMailbox, it.created, done)
	}
	if lastErr != nil {
		return false, fmt.Errorf("writing markers: %w", lastErr)
	}
	return len(batch) == r.opt.Batch, nil
}

// mark writes the processed marker onto an unmarked mailbox row; it never
// overwrites a marker (INV-7).
func (r *Relay) mark(ctx context.Context, msgID int64) (string, error) {
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now := r.opt.Clock.Now()
	res, err := r.opt.Mailbox.ExecContext(mctx, `UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED=?, CMINMSGS_STATUS=?
		WHERE CMINMSGS_ID=? AND CMINMSGS_DATE_PROCESSED IS NULL`, now, r.opt.ProcessedValue, msgID)
	if err != nil {
		return "", fmt.Errorf("writing marker of %d: %w", msgID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", fmt.Errorf("writing marker of %d: %w", msgID, err)
	}
	if n == 1 {
		return OutcomeWritten, nil
	}
	var processed sql.NullTime
	err = r.opt.Mailbox.QueryRowContext(mctx, `SELECT CMINMSGS_DATE_PROCESSED FROM CMINMSGS WHERE CMINMSGS_ID=?`, msgID).Scan(&processed)
	if errors.Is(err, sql.ErrNoRows) {
		return OutcomeRowMissing, nil
	}
	if err != nil {
		return "", fmt.Errorf("checking marker of %d: %w", msgID, err)
	}
	if processed.Valid {
		return OutcomeAlreadyMarked, nil
	}
	return "", fmt.Errorf("marker of %d: row unmarked but not updated", msgID)
}

// markAbandoned ends the intent of a mailbox row that does not exist. The
// backfill is finished (backfilled_at set, outcome "abandoned") in the same
// statement, so the unmarked backlog stops counting a message that can never
// be marked; the ABANDONED row stays listed and counted for the operators
// until they acknowledge it (R-D4).
func (r *Relay) markAbandoned(ctx context.Context, id int64, now time.Time) error {
	if _, err := r.db(TargetMailbox).Exec(ctx, `
		WITH o AS (UPDATE outbox SET state='ABANDONED', outcome=$2, attempts=attempts+1, sent_at=$3 WHERE id=$1 RETURNING msg_id)
		UPDATE proc_state SET backfilled_at=$3, backfill_outcome=$4 WHERE msg_id IN (SELECT msg_id FROM o)`,
		id, OutcomeRowMissing, now, BackfillAbandoned); err != nil {
		return fmt.Errorf("recording abandoned backfill: %w", err)
	}
	return nil
}

func (r *Relay) markSent(ctx context.Context, id, msgID int64, outcome string, now time.Time) error {
	_, err := r.db(TargetMailbox).Exec(ctx, `
		WITH o AS (UPDATE outbox SET state='SENT', outcome=$2, sent_at=$3, attempts=attempts+1 WHERE id=$1 RETURNING msg_id)
		UPDATE proc_state SET backfilled_at=$3, backfill_outcome=$2 WHERE msg_id IN (SELECT msg_id FROM o)`, id, outcome, now)
	if err != nil {
		return fmt.Errorf("recording marker of %s: %w", strconv.FormatInt(msgID, 10), err)
	}
	r.sent.Add(ctx, 1, targetAttr(TargetMailbox))
	return nil
}

// markFailed backs a transient failure off (30 s doubling to 15 min) and
// stops automatic retries with an alert at backfill-max-attempts, or at
// once when the message finished more than R (OverdueBackfill) ago. The
// age is measured from created, the intent's creation by the processor
// with the terminal state: our own clock, never the mailbox's
// CMINMSGS_DATE_RECEIVED, which may be NULL or skewed (INV-7).
func (r *Relay) markFailed(ctx context.Context, id, msgID int64, attempts int, created time.Time, cause error, now time.Time) error {
	r.failed.Add(ctx, 1, targetAttr(TargetMailbox))
	if r.opt.OverdueBackfill > 0 && now.Sub(created) >= r.opt.OverdueBackfill {
		r.log.Error("backfill overdue; automatic retries stopped, operator action needed", "msg_id", msgID, "attempts", attempts,
			"finished_at", created, "overdue_after", r.opt.OverdueBackfill, "err", cause, "alert", "backfill-overdue")
		r.markers.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", OutcomeOverdue)))
		_, err := r.db(TargetMailbox).Exec(ctx, `UPDATE outbox SET state='DEAD', outcome=$2, attempts=$3, last_error=$4 WHERE id=$1`, id, OutcomeOverdue, attempts, cause.Error())
		if err != nil {
			return fmt.Errorf("recording overdue backfill: %w", err)
		}
		return nil
	}
	if attempts >= r.opt.BackfillMaxAttempts {
		r.log.Error("backfill gave up; operator action needed", "msg_id", msgID, "attempts", attempts, "err", cause, "alert", "backfill-gave-up")
		r.markers.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", OutcomeGaveUp)))
		_, err := r.db(TargetMailbox).Exec(ctx, `UPDATE outbox SET state='DEAD', outcome=$2, attempts=$3, last_error=$4 WHERE id=$1`, id, OutcomeGaveUp, attempts, cause.Error())
		if err != nil {
			return fmt.Errorf("recording backfill give-up: %w", err)
		}
		return nil
	}
	next := now.Add(backoff(attempts, r.opt.BackfillBackoffMin, r.opt.BackfillBackoffMax))
	r.log.Warn("writing marker failed; will retry", "msg_id", msgID, "attempt", attempts, "next_attempt_at", next, "err", cause)
	_, err := r.db(TargetMailbox).Exec(ctx, `UPDATE outbox SET attempts=$2, last_error=$3, next_attempt_at=$4 WHERE id=$1`, id, attempts, cause.Error(), next)
	if err != nil {
		return fmt.Errorf("recording marker failure: %w", err)
	}
	return nil
}
