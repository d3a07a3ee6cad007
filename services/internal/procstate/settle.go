package procstate

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"msgexchange/services/internal/outbox"
)

// SucceededAt is a message Succeed finished, with its APPLIED time.
type SucceededAt struct {
	MsgID   int64
	Applied *time.Time
}

// succeedSQL moves every message of $1 that is APPLIED — since before $3,
// when $3 is not NULL — with nothing pending any more to SUCCEEDED and
// writes its mailbox intent (INV-23, INV-8). Whether anything is pending
// is one probe of projection_pending's primary key per message (OFFSET 0
// keeps it a probe, not an anti-join over the table). The intents are
// written for every message s finished (a data-modifying CTE runs whether
// read or not), so the result is read from s alone: joined with the
// intents, in the ack transaction that turns hash joins off, it was a
// nested loop of every finished message against every intent — 78 s for
// the 50,000 messages of a caught-up backlog (R-M5).
var succeedSQL = `
	WITH s AS (
		UPDATE proc_state ps SET state='SUCCEEDED', finished_at=$2, updated_at=$2
		WHERE ps.msg_id = ANY($1) AND ps.state='APPLIED'
		  AND ($3::timestamptz IS NULL OR COALESCE(ps.applied_at, ps.updated_at) < $3)
		  AND NOT EXISTS (SELECT 1 FROM projection_pending p WHERE p.msg_id = ps.msg_id OFFSET 0)
		RETURNING ps.msg_id, ps.applied_at),
	o AS (
		` + outbox.InsertMailboxIntent("s", 2) + `
		RETURNING msg_id)
	SELECT msg_id, applied_at FROM s ORDER BY msg_id`

// QueueSucceed queues, on b, SUCCEEDED for the messages of ids whose last
// projection is acknowledged (the acks), or that the self-check finds
// APPLIED since before appliedBefore (non-nil) with nothing pending. The
// caller holds their row locks, taken by an earlier statement, so the
// check sees every ack committed before. done receives the messages
// finished, in msg_id order.
func QueueSucceed(b *pgx.Batch, ids []int64, at time.Time, appliedBefore *time.Time, done func([]SucceededAt) error) {
	b.Queue(succeedSQL, ids, at, appliedBefore).Query(func(r pgx.Rows) error {
		finished, err := pgx.CollectRows(r, pgx.RowToStructByPos[SucceededAt])
		if err != nil {
			return fmt.Errorf("finishing applied messages: %w", err)
		}
		return done(finished)
	})
}

// QueueRepairIntent queues, on b, the missing mailbox intent of msgID if
// it is terminal since before cutoff, its marker not recorded and no
// intent of it waiting (the self-check's repair, R-L2); the intent is
// created at the message's finished_at and due at at. done receives
// whether it was written.
func QueueRepairIntent(b *pgx.Batch, msgID int64, at, cutoff time.Time, done func(bool) error) {
	b.Queue(`
		INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		SELECT $4, ps.msg_id::text, ps.msg_id, $2, ps.finished_at FROM proc_state ps
		WHERE ps.msg_id=$1 AND ps.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
		  AND ps.finished_at < $3 AND ps.backfilled_at IS NULL
		  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.msg_id = ps.msg_id AND o.target = $4 AND o.state <> 'SENT')`,
		msgID, at, cutoff, outbox.Mailbox).Exec(func(tag pgconn.CommandTag) error {
		return done(tag.RowsAffected() == 1)
	})
}

// End is DEAD by an operator's decision (the control plane's
// EndMessage): from any open state, APPLIED included. Unlike the
// processor's Finish it keeps the execution marker, the identity and the
// META columns as they are.
type End struct {
	MsgID int64
	// Class is the error class (OPERATOR); Reason the stored reason.
	Class, Reason string
}

// Ended is a message End moved, with the ID of its mailbox intent.
type Ended struct {
	MsgID, OutboxID int64
}

// endSQL ends open messages DEAD with their mailbox intents ($4: now).
var endSQL = `
		WITH u AS (
			UPDATE proc_state p SET state = 'DEAD', error_class = v.cls, reason = v.reason, finished_at = $4, updated_at = $4,
				next_attempt_at = NULL
			FROM unnest($1::bigint[], $2::text[], $3::text[]) AS v(id, cls, reason)
			WHERE p.msg_id = v.id AND ` + unfinishedRow + `
			RETURNING p.msg_id)
		` + outbox.InsertMailboxIntent("u", 4) + `
		RETURNING msg_id, id`

// QueueEnd queues rows, ended at at, and their mailbox intents on b as
// one statement; done receives the messages that were open and are now
// DEAD.
func QueueEnd(b *pgx.Batch, rows []End, at time.Time, done func([]Ended) error) {
	ids, classes, reasons := make([]int64, len(rows)), make([]string, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		ids[i], classes[i], reasons[i] = r.MsgID, r.Class, r.Reason
	}
	b.Queue(endSQL, ids, classes, reasons, at).Query(func(r pgx.Rows) error {
		ended, err := pgx.CollectRows(r, pgx.RowToStructByPos[Ended])
		if err != nil {
			return fmt.Errorf("writing DEAD and the mailbox intent: %w", err)
		}
		return done(ended)
	})
}
