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
func (e *Engine) RunCleanup(ctx context.Context) (CleanupResult, error) {
	now := e.clock.Now()
	res := CleanupResult{Cutoff: now.Add(-e.recordRetention())}
	batch := e.cleanupBatch()
	for {
		var records, outbox int64
		err := e.inTx(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `
			WITH victims AS (
				SELECT p.msg_id FROM proc_state p
				WHERE `+cleanupDue+`
				ORDER BY p.finished_at, p.msg_id
				LIMIT $2
				FOR UPDATE OF p SKIP LOCKED
			), out AS (
				DELETE FROM outbox o USING victims v WHERE o.msg_id = v.msg_id AND o.state = 'SENT' RETURNING o.id
			), del AS (
				DELETE FROM proc_state p USING victims v WHERE p.msg_id = v.msg_id RETURNING p.msg_id
			)
			SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM out)`, res.Cutoff, batch).Scan(&records, &outbox)
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
