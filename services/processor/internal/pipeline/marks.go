package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit TO off`); err != nil {
			return fmt.Errorf("relaxing marker commit: %w", err)
		}
		var marked bool
		err := tx.QueryRow(ctx, `
			WITH m AS (
				UPDATE proc_state SET executing_by = CASE WHEN msg_id = $1 THEN $2 END, executing_through = NULL,
					processing_started_at = CASE WHEN msg_id = $1 THEN COALESCE(processing_started_at, $3) ELSE processing_started_at END
				WHERE msg_id = ANY (ARRAY[$1::bigint, $4::bigint]) AND (msg_id <> $1 OR state IN ('PENDING', 'FAILED'))
				RETURNING msg_id, executing_by)
			SELECT EXISTS (SELECT 1 FROM m WHERE executing_by IS NOT NULL)`,
			msgID, e.instance, e.clock.Now(), e.marked).Scan(&marked)
		if err != nil {
			return fmt.Errorf("marking head %d executing: %w", msgID, err)
		}
		if !marked {
			return fmt.Errorf("marking head %d executing: %w", msgID, ErrNotOpen)
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.marked = msgID
	return nil
}

// markNextSQL moves this instance's marker ($2; its previous one on $4)
// from $1 to the head at or above the floor $5 if it is due at $3. The
// rows are named by one array, an index condition on the primary key: an
// OR of "IN (…)" lists would make the planner scan the whole table.
const markNextSQL = `
	WITH nxt AS (
		SELECT msg_id FROM proc_state WHERE state IN ('PENDING', 'FAILED') AND msg_id >= $5 ORDER BY msg_id LIMIT 1
	), due AS (
		SELECT p.msg_id FROM proc_state p JOIN nxt USING (msg_id)
		WHERE p.state = 'PENDING' OR p.next_attempt_at <= $3
	)
	UPDATE proc_state p SET
		executing_by = CASE WHEN p.msg_id IN (SELECT msg_id FROM due) THEN $2 END, executing_through = NULL,
		processing_started_at = CASE WHEN p.msg_id IN (SELECT msg_id FROM due)
			THEN COALESCE(p.processing_started_at, $3) ELSE p.processing_started_at END
	WHERE p.msg_id = ANY (ARRAY[$1::bigint, $4::bigint] || ARRAY(SELECT msg_id FROM due))
	RETURNING p.msg_id, p.executing_by IS NOT NULL, p.state IN ('PENDING', 'FAILED')`

// markNext hands the execution marker, inside a transaction that finished
// (or moved) msgID, to the head that follows — the smallest open message,
// if it is due now — and sets its processing start if it has none (R-H1).
// It clears this instance's previous marker. It reports the message it
// marked (0 for none) and whether msgID itself is still open.
func (e *Engine) markNext(ctx context.Context, tx pgx.Tx, msgID int64) (next int64, open bool, err error) {
	floor, _ := e.floor.read()
	rows, err := tx.Query(ctx, markNextSQL,
		msgID, e.instance, e.clock.Now(), e.marked, floor)
	if err != nil {
		return 0, false, fmt.Errorf("marking next head: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var marked, isOpen bool
		if err := rows.Scan(&id, &marked, &isOpen); err != nil {
			return 0, false, fmt.Errorf("marking next head: %w", err)
		}
		if marked {
			next = id
		}
		if id == msgID {
			open = isOpen
		}
	}
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("marking next head: %w", err)
	}
	return next, open, nil
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
	_, err := e.exec(uctx, `UPDATE proc_state SET executing_by = NULL, executing_through = NULL WHERE msg_id = $1 AND executing_by = $2`, msgID, e.instance)
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
