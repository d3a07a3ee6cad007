package procstate

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Claim marks a head for execution by an instance (R-H1).
type Claim struct {
	// Head is the message about to run; it must be PENDING or FAILED.
	Head int64
	// Through is, for a batch, its last message (executing_through); 0
	// for a single message.
	Through int64
	// Instance names the executing process (executing_by).
	Instance string
	// At is the head's processing start if it has none.
	At time.Time
	// Previous is the instance's earlier claim, withdrawn by the same
	// statement (0 for none).
	Previous int64
}

// claimSQL writes a Claim: the marker on the head if it is still open and
// none on the previous one; the statement fails (msgx_check) unless the
// head is now claimed.
const claimSQL = `
	WITH m AS (
		UPDATE proc_state SET executing_by = CASE WHEN msg_id = $1 THEN $2 END,
			executing_through = CASE WHEN msg_id = $1 THEN NULLIF($5::bigint, 0) END,
			processing_started_at = CASE WHEN msg_id = $1 THEN COALESCE(processing_started_at, $3) ELSE processing_started_at END
		WHERE msg_id = ANY (ARRAY[$1::bigint, $4::bigint]) AND (msg_id <> $1 OR state IN ('PENDING', 'FAILED'))
		RETURNING executing_by)
	SELECT msgx_check(EXISTS (SELECT 1 FROM m WHERE executing_by IS NOT NULL), 'the head is no longer open: not claimed')`

// QueueClaim queues c on b, the statements of a transaction of its own
// that is not committed synchronously: the marker guards against the
// death of the processor, not of PostgreSQL, and the next synchronous
// commit (the execution's outcome) makes it durable with itself. The
// claim's statement fails with msgx_check (Checked) unless the head was
// still open and is now claimed, so the transaction can be sent with its
// COMMIT (lease.SendAtCommit): a refused claim commits nothing.
func QueueClaim(b *pgx.Batch, c Claim) {
	b.Queue(`SET LOCAL synchronous_commit TO off`)
	b.Queue(claimSQL, c.Head, c.Instance, c.At, c.Previous, c.Through)
}

// HandOver moves an instance's claim, in the transaction that finished
// (or moved) a message, to the head that follows.
type HandOver struct {
	// From is the message the transaction finished or moved.
	From int64
	// Instance names the executing process.
	Instance string
	// At is now: the next head is claimed if it is due at At, and gets At
	// as its processing start if it has none.
	At time.Time
	// Previous is the instance's earlier claim, withdrawn too.
	Previous int64
	// Floor is the head floor: no message below it is open.
	Floor int64
	// Ahead is the run the executor would take as a batch from the next
	// head: its marker names the last of the first Ahead open messages as
	// executing_through, so that the batch needs no marker of its own (a
	// round trip, R-M2) unless more arrived meanwhile. 0 or 1, or a head
	// that is a retry (it runs alone), marks the head alone.
	Ahead int
}

// HandOverSQL moves the marker ($2; its previous one on $4) from $1 to
// the head at or above the floor $5 if it is due at $3, through the last
// of the first $6 open messages if that head is fresh (HandOver.Ahead). The rows are named
// by one array, an index condition on the primary key: an OR of "IN (…)"
// lists would make the planner scan the whole table.
const HandOverSQL = `
	WITH nxt AS (
		SELECT msg_id FROM proc_state WHERE state IN ('PENDING', 'FAILED') AND msg_id >= $5 ORDER BY msg_id LIMIT 1
	), due AS (
		SELECT p.msg_id, p.state = 'PENDING' AND p.attempts = 0 AS fresh FROM proc_state p JOIN nxt USING (msg_id)
		WHERE p.state = 'PENDING' OR p.next_attempt_at <= $3
	), span AS (
		SELECT NULLIF(max(s.msg_id), (SELECT msg_id FROM due)) AS through FROM (
			SELECT msg_id FROM proc_state WHERE state IN ('PENDING', 'FAILED') AND msg_id >= $5 ORDER BY msg_id LIMIT GREATEST($6::int, 1)
		) s WHERE (SELECT fresh FROM due)
	)
	UPDATE proc_state p SET
		executing_by = CASE WHEN p.msg_id IN (SELECT msg_id FROM due) THEN $2 END,
		executing_through = CASE WHEN p.msg_id IN (SELECT msg_id FROM due) THEN (SELECT through FROM span) END,
		processing_started_at = CASE WHEN p.msg_id IN (SELECT msg_id FROM due)
			THEN COALESCE(p.processing_started_at, $3) ELSE p.processing_started_at END
	WHERE p.msg_id = ANY (ARRAY[$1::bigint, $4::bigint] || ARRAY(SELECT msg_id FROM due))
	RETURNING p.msg_id, p.executing_by IS NOT NULL, p.state IN ('PENDING', 'FAILED')`

// WriteHandOver writes h in db. It reports the message it claimed (0 for
// none) and whether h.From is still open.
func WriteHandOver(ctx context.Context, db DB, h HandOver) (next int64, open bool, err error) {
	b := &pgx.Batch{}
	QueueHandOver(b, h, func(n int64, o bool) error {
		next, open = n, o
		return nil
	})
	if err := send(ctx, db, b); err != nil {
		return 0, false, fmt.Errorf("handing the execution marker over from %d: %w", h.From, err)
	}
	return next, open, nil
}

// QueueHandOver queues h on b, to go with the statements that finished
// h.From in one round trip; done hears the message it claimed (0 for none)
// and whether h.From is still open.
func QueueHandOver(b *pgx.Batch, h HandOver, done func(next int64, open bool) error) {
	b.Queue(HandOverSQL, h.From, h.Instance, h.At, h.Previous, h.Floor, h.Ahead).Query(func(rows pgx.Rows) error {
		var next int64
		var open bool
		for rows.Next() {
			var id int64
			var marked, isOpen bool
			if err := rows.Scan(&id, &marked, &isOpen); err != nil {
				return fmt.Errorf("marking next head: %w", err)
			}
			if marked {
				next = id
			}
			if id == h.From {
				open = isOpen
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("marking next head: %w", err)
		}
		return done(next, open)
	})
}

// Unclaim withdraws instance's claims of ids, whatever their state: an
// execution cut short by stopping, not by a failure of the message.
func Unclaim(ctx context.Context, db DB, instance string, ids ...int64) error {
	if _, err := db.Exec(ctx, `UPDATE proc_state SET executing_by = NULL, executing_through = NULL
		WHERE msg_id = ANY($1) AND executing_by = $2`, ids, instance); err != nil {
		return fmt.Errorf("withdrawing execution markers: %w", err)
	}
	return nil
}

// Release withdraws the claim of a batch that did not commit from its
// head, if the head is still open, and the processing start the claim
// gave it when it had none before (resetStart).
func Release(ctx context.Context, db DB, instance string, head int64, resetStart bool) error {
	if _, err := db.Exec(ctx, `UPDATE proc_state SET executing_by = NULL, executing_through = NULL,
			processing_started_at = CASE WHEN $2 THEN NULL ELSE processing_started_at END
		WHERE msg_id = $1 AND executing_by = $3 AND state IN ('PENDING', 'FAILED')`, head, resetStart, instance); err != nil {
		return fmt.Errorf("withdrawing batch marker: %w", err)
	}
	return nil
}

// ReleaseFrom withdraws every claim of instance on open messages from
// msg_id from on: the run of a batch a dead instance did not finish, or,
// from 0, whatever a live instance left marked when its term ended.
func ReleaseFrom(ctx context.Context, db DB, instance string, from int64) error {
	if _, err := db.Exec(ctx, `UPDATE proc_state SET executing_by = NULL, executing_through = NULL
		WHERE state IN ('PENDING', 'FAILED') AND executing_by = $1 AND msg_id >= $2`, instance, from); err != nil {
		return fmt.Errorf("withdrawing markers of %s from message %d: %w", instance, from, err)
	}
	return nil
}
