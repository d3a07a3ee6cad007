package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Defaults of the record cleanup, used where Options leave them zero.
const (
	// DefaultRecordRetention keeps finished records 30 days (R-B10); it is
	// also how long a business identity is remembered for duplicate
	// detection (R-B4).
	DefaultRecordRetention = 30 * 24 * time.Hour

	defaultCleanupBatch = 1000
)

// CleanupResult is what one record cleanup did (R-B10).
type CleanupResult struct {
	// Cutoff is the finish time before which records were due.
	Cutoff time.Time
	// Records is the number of proc_state rows deleted.
	Records int64
	// Outbox is the number of delivered outbox rows deleted: those of the
	// deleted records and the deletions of swept flights.
	Outbox int64
}

// cleanupDue is the condition on proc_state row p of a record the cleanup
// deletes, finished before the parameter $1; sweptDeletionDue that on an
// outbox row of a delivered sweep deletion (no message) it deletes. The
// dry run (CountCleanup) counts with the same conditions.
const (
	cleanupDue = `p.backfilled_at IS NOT NULL AND p.finished_at < $1
				  AND p.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
				  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.msg_id = p.msg_id AND o.state <> 'SENT')`
	sweptDeletionDue = `msg_id IS NULL AND state = 'SENT' AND sent_at < $1
				  AND target IN ('` + TargetFlightState + `', '` + TargetMsg + `', '` + TargetSchd + `')`
)

// The cleanup lock serialises the record cleanup with registration
// (R-L6): a registration holds it shared for its transaction, each
// cleanup batch exclusively. Without it a registration whose statement
// began before a cleanup batch committed could read the shadow_cleanup
// range without the IDs that batch deletes, wait on a deleted row and
// then insert the ID as a new message — executed a second time. An
// advisory lock, not a row lock, so that registration writes nothing for
// it; the cleanup runs once a day in batches of cleanupBatch.
const (
	cleanupLockKey       = "proc_state_cleanup"
	cleanupLockShared    = `SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`
	cleanupLockExclusive = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
)

func (e *Engine) recordRetention() time.Duration {
	if e.opt.RecordRetention > 0 {
		return e.opt.RecordRetention
	}
	return DefaultRecordRetention
}

func (e *Engine) cleanupBatch() int {
	if e.opt.CleanupBatch > 0 {
		return e.opt.CleanupBatch
	}
	return defaultCleanupBatch
}

// RunCleanup deletes, in batches, the proc_state rows that are terminal,
// backfilled and finished before now − record-retention, with their
// delivered outbox rows (R-B10, INV-25, G-PROC-CLEANUP). A record is kept
// while any of its outbox rows is not SENT: an undelivered, dead-lettered
// or ABANDONED row (the abandoned backfill list) still needs it. PENDING,
// FAILED and APPLIED records are never deleted. Deleting a record also
// forgets its identity key, so the duplicate memory equals the retention.
// Delivered deletions of swept flights (no message) older than the same
// cutoff go too.
//
// A record whose backfill shadow mode settled unwritten (outcome
// shadowed, R-L6) is deleted like any other, so a shadow run piles up
// nothing; but its mailbox row may still be unmarked and published again
// (the predecessor's straggler, a row of the cutover's START on). The
// batch that deletes it widens the shadow_cleanup range to its ID, and
// registration finishes a record of an unregistered ID in that range
// SKIPPED instead of executing it again (procstate.QueueRegister).
func (e *Engine) RunCleanup(ctx context.Context) (CleanupResult, error) {
	now := e.clock.Now()
	res := CleanupResult{Cutoff: now.Add(-e.recordRetention())}
	batch := e.cleanupBatch()
	for {
		var records, outbox int64
		err := e.inTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, cleanupLockExclusive, cleanupLockKey); err != nil {
				return fmt.Errorf("taking the cleanup lock: %w", err)
			}
			return tx.QueryRow(ctx, `
			WITH victims AS (
				SELECT p.msg_id, p.backfill_outcome = 'shadowed' AS shadowed FROM proc_state p
				WHERE `+cleanupDue+`
				ORDER BY p.finished_at, p.msg_id
				LIMIT $2
				FOR UPDATE OF p SKIP LOCKED
			), out AS (
				DELETE FROM outbox o USING victims v WHERE o.msg_id = v.msg_id AND o.state = 'SENT' RETURNING o.id
			), del AS (
				DELETE FROM proc_state p USING victims v WHERE p.msg_id = v.msg_id RETURNING p.msg_id
			), shadow AS (
				INSERT INTO shadow_cleanup AS s (id, min_msg_id, max_msg_id, records, updated_at)
				SELECT 1, min(msg_id), max(msg_id), count(*), $3 FROM victims WHERE shadowed HAVING count(*) > 0
				ON CONFLICT (id) DO UPDATE SET min_msg_id = least(s.min_msg_id, EXCLUDED.min_msg_id),
					max_msg_id = greatest(s.max_msg_id, EXCLUDED.max_msg_id),
					records = s.records + EXCLUDED.records, updated_at = EXCLUDED.updated_at
			)
			SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM out)`, res.Cutoff, batch, now).Scan(&records, &outbox)
		})
		if err != nil {
			return res, fmt.Errorf("deleting finished records: %w", err)
		}
		res.Records += records
		res.Outbox += outbox
		if records < int64(batch) {
			break
		}
	}
	for {
		tag, err := e.exec(ctx, `
			DELETE FROM outbox WHERE id IN (
				SELECT id FROM outbox WHERE `+sweptDeletionDue+`
				LIMIT $2)`, res.Cutoff, batch)
		if err != nil {
			return res, fmt.Errorf("deleting delivered sweep deletions: %w", err)
		}
		res.Outbox += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			break
		}
	}
	e.log.Info("record cleanup done", "records", res.Records, "outbox_rows", res.Outbox, "finished_before", res.Cutoff)
	return res, nil
}

// CountCleanup is the cleanup's dry run (R-N9): what RunCleanup would
// delete now, counted with its conditions, writing nothing.
func (e *Engine) CountCleanup(ctx context.Context) (CleanupResult, error) {
	res := CleanupResult{Cutoff: e.clock.Now().Add(-e.recordRetention())}
	err := e.pool.QueryRow(ctx, `
		WITH victims AS (SELECT p.msg_id FROM proc_state p WHERE `+cleanupDue+`)
		SELECT (SELECT count(*) FROM victims),
			(SELECT count(*) FROM outbox o JOIN victims v ON o.msg_id = v.msg_id WHERE o.state = 'SENT')
			+ (SELECT count(*) FROM outbox WHERE `+sweptDeletionDue+`)`, res.Cutoff).Scan(&res.Records, &res.Outbox)
	if err != nil {
		return res, fmt.Errorf("counting finished records due for cleanup: %w", err)
	}
	return res, nil
}
