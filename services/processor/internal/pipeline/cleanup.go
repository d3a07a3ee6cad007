package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/pace"
)

// Defaults of the record cleanup, used where Options leave them zero.
const (
	// DefaultRecordRetention keeps finished records 30 days (R-B10); it is
	// also how long a business identity is remembered for duplicate
	// detection (R-B4).
	DefaultRecordRetention = 30 * 24 * time.Hour

	// defaultCleanupBatch is how many rows one step of the cleanup and the
	// purge deletes, each step a transaction of its own. A transaction of
	// the daily job holds its locks until it commits — the fence's share
	// lock on the processor's lease row among them, which the control
	// plane's renewal waits for — and a pipeline commit behind its own
	// waits for its WAL: with a year of history a batch of 1,000 records
	// took 453 ms and the renewal waited 181 ms (R-M5). The rests between
	// steps scale with the steps, so the job's length does not change.
	defaultCleanupBatch = 250

	// DefaultJobShare is the share of the time the daily job's deleting
	// steps may take (Options.JobShare). With a year of history, 0.1
	// kept the job's longest hold of the pipeline within what the same
	// load makes without it, where 0.25 did not (docs/performance.md); a
	// day's cleanup then takes about 4 minutes.
	DefaultJobShare = 0.1
	// maxJobRest caps one rest of the daily job: a step slowed by a
	// stalled database does not stop the job for longer.
	maxJobRest = 10 * time.Second
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
//
// OFFSET 0 keeps the NOT EXISTS a probe of outbox_msg_idx for each
// candidate: as an anti join, PostgreSQL, expecting almost no undelivered
// outbox rows, scanned the whole outbox once per batch to find them — with
// a year of history 4.4 GB and about 5 s for every 1,000 records, against
// 32 ms probed (EXPLAIN ANALYZE, R-M5).
const (
	cleanupDue = `p.backfilled_at IS NOT NULL AND p.finished_at < $1
				  AND p.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
				  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.msg_id = p.msg_id AND o.state <> 'SENT' OFFSET 0)`
	sweptDeletionDue = `msg_id IS NULL AND state = 'SENT' AND sent_at < $1
				  AND target IN ('` + TargetFlightState + `', '` + TargetMsg + `', '` + TargetSchd + `')`
)

// sweptDeletionDelete deletes up to $2 delivered sweep deletions sent
// before $1, oldest first: through outbox_swept_sent_idx (migration
// 00037) it reads the rows it deletes and stops at the cutoff, and it
// deletes them by primary key (= ANY of the array: an IN subquery let the
// generic plan, not knowing $2, hash it against a scan of the whole
// outbox).
const sweptDeletionDelete = `
	DELETE FROM outbox WHERE id = ANY (ARRAY(
		SELECT id FROM outbox WHERE ` + sweptDeletionDue + `
		ORDER BY sent_at LIMIT $2))`

// The cleanup lock serialises the deletion of shadowed records with
// registration (R-L6): a registration holds it shared for its
// transaction, each cleanup batch that may delete a shadowed record
// exclusively. Without it a registration whose statement began before
// such a batch committed could read the shadow_cleanup range without the
// IDs that batch deletes, wait on a deleted row and then insert the ID as
// a new message — executed a second time. Only a shadowed record's
// mailbox row can come again (its marker was the predecessor's to write);
// a record whose marker the dispatcher wrote is never published again, so
// its deletion takes no lock: a batch holding the lock holds every
// registration, and with a year of history a batch of 1,000 took 1–2.5 s
// on the 2-core machine, the pipeline's longest pause (R-M5). An advisory
// lock, not a row lock, so that registration writes nothing for it.
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

// jobPacer paces the daily job's deleting steps (R-M5). With a year of
// history the job deletes hundreds of thousands of records with their raw
// texts; run flat out, its WAL and dirtied pages make the live pipeline's
// commits wait for the disk (docs/performance.md, "A year of history at
// full size").
func (e *Engine) jobPacer() pace.Pacer {
	share := e.opt.JobShare
	if share <= 0 {
		share = DefaultJobShare
	}
	// The steps are timed on the wall clock, not the engine's: the rest
	// answers the database's real load.
	return pace.Pacer{Share: share, MaxRest: maxJobRest, Sleep: e.opt.JobSleep,
		Behind: e.pipelineBehind, YieldPoll: jobYieldPoll, MaxYield: jobMaxYield}
}

// The daily job gives way to a live pipeline that fell behind (R-M5):
// after each step's rest it waits, jobYieldPoll at a time and at most
// jobMaxYield, while a registered message has waited longer than
// jobYieldLag to execute. Healthy, registration to APPLIED takes tens of
// milliseconds; a message older than that waits on the executor, which on
// a loaded machine the job's deletions slow down. The cap keeps the job
// going under a backlog it did not cause (a head in backoff).
const (
	jobYieldLag  = 200 * time.Millisecond
	jobYieldPoll = 100 * time.Millisecond
	jobMaxYield  = 2 * time.Second
)

// pipelineBehind reports whether a message registered more than
// jobYieldLag ago still waits to execute: a read of the open messages
// (proc_state_open_idx), the backlog only.
func (e *Engine) pipelineBehind(ctx context.Context) (bool, error) {
	var behind bool
	err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM proc_state WHERE state IN ('PENDING', 'FAILED') AND registered_at < $1)`,
		e.clock.Now().Add(-jobYieldLag)).Scan(&behind)
	if err != nil {
		return false, fmt.Errorf("reading the pipeline's backlog: %w", err)
	}
	return behind, nil
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
	pacer := e.jobPacer()
	// First every due record but the shadowed ones, without the lock;
	// then, under it, what is left: the shadowed ones.
	for _, locked := range []bool{false, true} {
		for {
			var records, outbox int64
			err := pacer.Step(ctx, func() (err error) {
				records, outbox, err = e.cleanupBatchTx(ctx, res.Cutoff, batch, now, locked)
				return err
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
	}
	deleted, err := e.deletePaced(ctx, pacer, batch, sweptDeletionDelete, res.Cutoff, batch)
	res.Outbox += deleted
	if err != nil {
		return res, fmt.Errorf("deleting delivered sweep deletions: %w", err)
	}
	e.log.Info("record cleanup done", "records", res.Records, "outbox_rows", res.Outbox, "finished_before", res.Cutoff)
	return res, nil
}

// deletePaced runs sql, a DELETE of at most batch rows, one paced step at
// a time until a step deletes fewer than batch rows, and returns how many
// rows the steps deleted.
func (e *Engine) deletePaced(ctx context.Context, pacer pace.Pacer, batch int, sql string, args ...any) (int64, error) {
	var total int64
	for {
		var deleted int64
		err := pacer.Step(ctx, func() error {
			tag, err := e.jobExec(ctx, sql, args...)
			deleted = tag.RowsAffected()
			return err
		})
		total += deleted
		if err != nil || deleted < int64(batch) {
			return total, err
		}
	}
}

// cleanupBatchTx deletes up to batch due records with their delivered
// outbox rows in one transaction. Unlocked, it leaves shadowed records
// alone; locked, it takes the cleanup lock first and deletes any due
// record, widening the shadow_cleanup range to the shadowed ones.
//
// The locked batch first reads, without the lock, which due shadowed
// records there are, and takes the lock only when there is one, to delete
// those by ID: a batch holds every registration while it holds the lock,
// so the lock lasts the deletion of the records that need it, not a
// search of the history (R-M5; with none due, as in any run but a
// cutover's, it is never taken).
func (e *Engine) cleanupBatchTx(ctx context.Context, cutoff time.Time, batch int, now time.Time, locked bool) (records, outbox int64, err error) {
	onlyWritten := "AND p.backfill_outcome IS DISTINCT FROM 'shadowed'"
	args := []any{cutoff, batch, now}
	if locked {
		rows, err := e.pool.Query(ctx, `
			SELECT p.msg_id FROM proc_state p
			WHERE `+cleanupDue+` AND p.backfill_outcome = 'shadowed'
			ORDER BY p.finished_at, p.msg_id LIMIT $2`, cutoff, batch)
		if err != nil {
			return 0, 0, fmt.Errorf("listing shadowed records due: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return 0, 0, fmt.Errorf("listing shadowed records due: %w", err)
		}
		if len(ids) == 0 {
			return 0, 0, nil
		}
		onlyWritten = "AND p.msg_id = ANY($4::bigint[])"
		args = append(args, ids)
	}
	err = e.jobTx(ctx, func(tx pgx.Tx) error {
		if locked {
			if _, err := tx.Exec(ctx, cleanupLockExclusive, cleanupLockKey); err != nil {
				return fmt.Errorf("taking the cleanup lock: %w", err)
			}
		}
		return tx.QueryRow(ctx, `
			WITH victims AS (
				SELECT p.msg_id, p.backfill_outcome = 'shadowed' AS shadowed FROM proc_state p
				WHERE `+cleanupDue+`
				  `+onlyWritten+`
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
			SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM out)`, args...).Scan(&records, &outbox)
	})
	return records, outbox, err
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
