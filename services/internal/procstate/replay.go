package procstate

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/outbox"
)

// Replay opens messages again at an operator's request (R-F1): PENDING,
// no attempts, no marker, no outcome.
type Replay struct {
	// RequestID, Operator and Reason name the replay request, recorded in
	// replay_audit with each message's previous outcome.
	RequestID        int64
	Operator, Reason string
	// IDs are the messages asked for; only FAILED and DEAD ones of
	// Classes are replayed.
	IDs     []int64
	Classes []string
	At      time.Time
}

// WriteReplay replays the messages of r in tx and returns those it
// replayed, in msg_id order. It checks the classes under the row locks: a
// message may have been replayed, executed or cleaned up since the request
// was made. The identity key is kept, so the replayed message is never its
// own duplicate (R-B4); finished_at and backfilled_at are cleared because
// the message is open again and will get a new terminal state and a new
// mailbox intent. An undelivered intent of the earlier outcome must not
// mark the mailbox row while the message is open again (R-B6): it is
// withdrawn. A marker already written stays (INV-7).
func WriteReplay(ctx context.Context, tx pgx.Tx, r Replay) ([]int64, error) {
	rows, err := tx.Query(ctx, `
		WITH old AS (
			SELECT msg_id, state, error_class, attempts, reason FROM proc_state
			WHERE msg_id = ANY($1) AND state IN ('FAILED', 'DEAD') AND error_class = ANY($2)
			FOR UPDATE
		), upd AS (
			UPDATE proc_state p SET state='PENDING', error_class=NULL, reason=$3, attempts=0,
				next_attempt_at=NULL, processing_started_at=NULL, executing_by=NULL, executing_through=NULL, finished_at=NULL, backfilled_at=NULL, updated_at=$4
			FROM old WHERE p.msg_id = old.msg_id
			RETURNING p.msg_id
		), aud AS (
			INSERT INTO replay_audit (msg_id, request_id, operator, reason, previous_state, previous_class, previous_attempts, previous_reason, at)
			SELECT msg_id, $5, $6, $7, state, error_class, attempts, reason, $4 FROM old
		)
		SELECT msg_id FROM upd ORDER BY msg_id`,
		r.IDs, r.Classes, "replayed by request "+strconv.FormatInt(r.RequestID, 10), r.At, r.RequestID, r.Operator, r.Reason)
	if err != nil {
		return nil, fmt.Errorf("replaying messages of request %d: %w", r.RequestID, err)
	}
	replayed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("replaying messages of request %d: %w", r.RequestID, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE target=$1 AND msg_id = ANY($2) AND state IN ('PENDING', 'DEAD')`,
		outbox.Mailbox, replayed); err != nil {
		return nil, fmt.Errorf("withdrawing mailbox intents of request %d: %w", r.RequestID, err)
	}
	return replayed, nil
}
