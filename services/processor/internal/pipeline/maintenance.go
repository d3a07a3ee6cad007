package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"msgexchange/libs/clip"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/processor/internal/decide"
)

// Defaults of the maintenance options, used where Options leave them zero.
const (
	// DefaultRecordRetention keeps finished records 30 days (R-B10); it is
	// also how long a business identity is remembered for duplicate
	// detection (R-B4).
	DefaultRecordRetention = 30 * 24 * time.Hour
	// DefaultHistoryRetention keeps a flight live for 3 days after its
	// operation day (R-C11).
	DefaultHistoryRetention = 3 * 24 * time.Hour
	// DefaultHistoryRunAt is 03:30 airport time.
	DefaultHistoryRunAt = 3*time.Hour + 30*time.Minute

	// DefaultSelfCheckInterval is how often the self-check looks for
	// stranded messages (R-H4).
	DefaultSelfCheckInterval = 30 * time.Second
	// DefaultSelfCheckGrace is how old a stranded state must be before the
	// self-check repairs it, so it never acts on a state a live
	// transaction is still completing.
	DefaultSelfCheckGrace = time.Minute

	defaultCleanupBatch    = 1000
	defaultMaintenancePoll = time.Minute
	// selfCheckPage is how many candidates the self-check reads at once.
	selfCheckPage = 500
	// sweepPage is how many candidate FLIDs the history sweep reads at once.
	sweepPage = 500
	// historySweepReason is the reason of the deletion event of a flight the
	// sweep purged while it was still ACTIVE.
	historySweepReason = "history-sweep"
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

// HistoryResult is what one history sweep did (R-C11).
type HistoryResult struct {
	// Cutoff is the first operation day that stays live: flights of earlier
	// days were due.
	Cutoff time.Time
	// Archived is the number of flights copied to flight_history and
	// removed from flight.
	Archived int
	// Tombstones is how many of those were still ACTIVE and got their one
	// deletion (tombstone and FLIGHT_DELETED event).
	Tombstones int
	// Skipped is the number of due flights locked by a processing
	// transaction; the next run takes them (INV-18).
	Skipped int
	// Failed is the number of due flights whose archiving failed; they stay
	// live and the next run tries again (INV-28).
	Failed int
}

// MaintenanceResult is one daily maintenance run.
type MaintenanceResult struct {
	Cleanup CleanupResult
	History HistoryResult
	Purge   PurgeResult
}

func (e *Engine) recordRetention() time.Duration {
	if e.opt.RecordRetention > 0 {
		return e.opt.RecordRetention
	}
	return DefaultRecordRetention
}

// historyDays is the history retention in whole days.
func (e *Engine) historyDays() int {
	d := e.opt.HistoryRetention
	if d <= 0 {
		d = DefaultHistoryRetention
	}
	return int(d / (24 * time.Hour))
}

func (e *Engine) cleanupBatch() int {
	if e.opt.CleanupBatch > 0 {
		return e.opt.CleanupBatch
	}
	return defaultCleanupBatch
}

func (e *Engine) airportZone() *time.Location {
	if e.opt.Zone != nil {
		return e.opt.Zone
	}
	return time.UTC
}

// NextMaintenance returns the first run-at time (HistoryRunAt in the
// airport zone) strictly after now.
func (e *Engine) NextMaintenance(now time.Time) time.Time {
	zone := e.airportZone()
	local := now.In(zone)
	h := int(e.opt.HistoryRunAt / time.Hour)
	m := int(e.opt.HistoryRunAt % time.Hour / time.Minute)
	y, mo, d := local.Date()
	next := time.Date(y, mo, d, h, m, 0, 0, zone)
	if !next.After(now) {
		next = time.Date(y, mo, d+1, h, m, 0, 0, zone)
	}
	return next
}

// maintenanceService runs the record cleanup and the history sweep once a
// day at run-at, and the self-check (R-H4) at start and then every
// self-check interval. The next run times come from the injected clock,
// which the loop reads every MaintenancePoll at least; a run-at that passes
// while no processor runs is not made up, the next day's run covers its
// work (both jobs select by age).
func (e *Engine) maintenanceService() *lifecycle.Service {
	var next time.Time
	// The first run time is fixed before the service counts as running, so
	// a clock that moves right after the start cannot skip a day.
	return lifecycle.NewService("processor-maintenance", func(context.Context) error {
		next = e.NextMaintenance(e.clock.Now())
		e.log.Info("maintenance scheduled", "next_run", next)
		return nil
	}, func(ctx context.Context) error {
		poll := e.opt.MaintenancePoll
		if poll <= 0 {
			poll = defaultMaintenancePoll
		}
		var nextCheck time.Time // the zero time: check once at start
		for {
			now := e.clock.Now()
			if !now.Before(nextCheck) {
				// Runs start one interval apart, like a ticker's ticks; a run
				// longer than the interval is followed by the next at once.
				nextCheck = now.Add(e.selfCheckInterval())
				e.selfCheck(ctx)
				if ctx.Err() != nil {
					return nil
				}
				continue
			}
			if !now.Before(next) {
				if _, err := e.RunMaintenance(ctx, next); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					e.log.Error("maintenance run failed; next run tomorrow", "err", err, "alert", "maintenance-failed")
				}
				// The run after this one is the day after it, whatever the
				// clock says now: a clock read after the run could already be
				// past that day's run-at (a long run, a suspended machine, a
				// test's clock) and skip it. A day missed that way runs at
				// once, one run per missed day.
				next = e.NextMaintenance(next)
				e.log.Info("maintenance scheduled", "next_run", next)
				continue
			}
			wait := min(next.Sub(now), nextCheck.Sub(now), poll)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}, nil)
}

func (e *Engine) selfCheckInterval() time.Duration {
	if e.opt.SelfCheckInterval > 0 {
		return e.opt.SelfCheckInterval
	}
	return DefaultSelfCheckInterval
}

func (e *Engine) selfCheckGrace() time.Duration {
	if e.opt.SelfCheckGrace > 0 {
		return e.opt.SelfCheckGrace
	}
	return DefaultSelfCheckGrace
}

// Kinds of stranded message the self-check repairs (R-H4): the kind
// attribute of msgx_processor_selfcheck_repaired_total and of the alert
// log line.
const (
	// StrandedApplied is an APPLIED message without a pending projection:
	// no ack will ever finish it.
	StrandedApplied = "applied-without-pending"
	// StrandedTerminal is a terminal message (SUCCEEDED, SKIPPED, DEAD)
	// whose mailbox marker is not written and that has no backfill intent
	// waiting: nothing will ever mark its mailbox row.
	StrandedTerminal = "terminal-without-intent"
)

// SelfCheckResult is what one self-check run repaired (R-H4).
type SelfCheckResult struct {
	// Cutoff is the grace cutoff: only states older than it were repaired.
	Cutoff time.Time
	// Applied are the APPLIED messages without a pending projection that
	// were finished SUCCEEDED with their backfill intent, in msg_id order.
	Applied []int64
	// Terminal are the terminal messages without a backfill intent that got
	// one, in finish order.
	Terminal []int64
}

// selfCheck runs the self-check for the maintenance loop: a failed run is
// logged and the next interval tries again.
func (e *Engine) selfCheck(ctx context.Context) {
	// The head floor's safety net (floor.go): a message opened by a path
	// that does not lower the floor waits at most one interval.
	e.floor.reset()
	res, err := e.RunSelfCheck(ctx)
	if err != nil && ctx.Err() == nil {
		e.log.Error("self-check failed; next run at the next interval", "err", err,
			"repaired_applied", len(res.Applied), "repaired_terminal", len(res.Terminal), "alert", "selfcheck-failed")
	}
}

// RunSelfCheck finds every message whose next step is not scheduled and
// finishes it (R-H4). Every other state of a message has a next step that
// something is bound to take: PENDING and FAILED are the executor's head or
// behind it, APPLIED waits for the acks of its pending projections, and a
// terminal message's backfill intent waits for the dispatcher. Two states
// have none:
//
//   - APPLIED without a pending projection: no ack will ever move it. It is
//     finished SUCCEEDED with its backfill intent, as the last ack would
//     have done.
//   - terminal, not marked, without a backfill intent that is not SENT (a
//     SENT one belongs to an earlier outcome before a replay): the mailbox
//     row would never be marked. The intent is written, with the finish
//     time as its creation time, so the dispatcher's overdue bound still
//     counts from the finish (INV-7).
//
// Only states older than the self-check grace are considered, and each
// repair is one fenced transaction that locks the message's row and checks
// its state again in a statement that starts after the lock is held, so a
// transaction that is still completing the message (an ack, the executor,
// a replay) is waited for and never raced. Each repair is counted in
// msgx_processor_selfcheck_repaired_total{kind} and logged at ERROR with
// alert "stranded-message": a repair means a path that should have
// scheduled the next step did not, which is a bug to report. The
// candidates are read through partial indexes that hold only APPLIED and
// only unmarked terminal messages, never the terminal history. A failing
// repair (the lease lost included) ends the run at once.
func (e *Engine) RunSelfCheck(ctx context.Context) (SelfCheckResult, error) {
	res := SelfCheckResult{Cutoff: e.clock.Now().Add(-e.selfCheckGrace())}
	var after int64
	for {
		rows, err := e.pool.Query(ctx, `
			SELECT ps.msg_id FROM proc_state ps
			WHERE ps.state = 'APPLIED' AND ps.msg_id > $2 AND COALESCE(ps.applied_at, ps.updated_at) < $1
			  AND NOT EXISTS (SELECT 1 FROM projection_pending p WHERE p.msg_id = ps.msg_id)
			ORDER BY ps.msg_id LIMIT $3`, res.Cutoff, after, selfCheckPage)
		if err != nil {
			return res, fmt.Errorf("listing applied messages without pending projections: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return res, fmt.Errorf("listing applied messages without pending projections: %w", err)
		}
		for _, id := range ids {
			ok, err := e.repairApplied(ctx, id, res.Cutoff)
			if err != nil {
				return res, err
			}
			if ok {
				res.Applied = append(res.Applied, id)
				e.reportRepair(ctx, id, StrandedApplied)
			}
		}
		if len(ids) < selfCheckPage {
			break
		}
		after = ids[len(ids)-1]
	}
	var afterAt time.Time // keyset (finished_at, msg_id); the zero time precedes every finish
	after = 0
	for {
		rows, err := e.pool.Query(ctx, `
			SELECT ps.msg_id, ps.finished_at FROM proc_state ps
			WHERE ps.finished_at IS NOT NULL AND ps.backfilled_at IS NULL
			  AND ps.finished_at < $1 AND (ps.finished_at, ps.msg_id) > ($2, $3)
			  AND ps.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
			  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.msg_id = ps.msg_id AND o.target = $5 AND o.state <> 'SENT')
			ORDER BY ps.finished_at, ps.msg_id LIMIT $4`, res.Cutoff, afterAt, after, selfCheckPage, TargetMailbox)
		if err != nil {
			return res, fmt.Errorf("listing terminal messages without backfill intent: %w", err)
		}
		type candidate struct {
			id       int64
			finished time.Time
		}
		cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
			var c candidate
			err := r.Scan(&c.id, &c.finished)
			return c, err
		})
		if err != nil {
			return res, fmt.Errorf("listing terminal messages without backfill intent: %w", err)
		}
		for _, c := range cands {
			ok, err := e.repairTerminal(ctx, c.id, res.Cutoff)
			if err != nil {
				return res, err
			}
			if ok {
				res.Terminal = append(res.Terminal, c.id)
				e.reportRepair(ctx, c.id, StrandedTerminal)
			}
		}
		if len(cands) < selfCheckPage {
			break
		}
		last := cands[len(cands)-1]
		afterAt, after = last.finished, last.id
	}
	return res, nil
}

// reportRepair counts and logs one repair of the self-check.
func (e *Engine) reportRepair(ctx context.Context, msgID int64, kind string) {
	e.metrics.selfCheckRepaired.Add(ctx, 1, kindAttr(kind))
	e.log.Error("stranded message finished by the self-check", "msg_id", msgID, "kind", kind, "alert", "stranded-message")
}

// repairApplied finishes msgID SUCCEEDED with its backfill intent if it is
// still APPLIED since before cutoff without a pending projection, checked
// after its row lock is held. It reports whether it did.
func (e *Engine) repairApplied(ctx context.Context, msgID int64, cutoff time.Time) (bool, error) {
	var repaired bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		now := e.clock.Now()
		tag, err := lockedExec(ctx, tx, msgID, `
			WITH s AS (
				UPDATE proc_state ps SET state='SUCCEEDED', finished_at=$2, updated_at=$2
				WHERE ps.msg_id=$1 AND ps.state='APPLIED' AND COALESCE(ps.applied_at, ps.updated_at) < $3
				  AND NOT EXISTS (SELECT 1 FROM projection_pending p WHERE p.msg_id = ps.msg_id)
				RETURNING ps.msg_id)
			INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
			SELECT $4, msg_id::text, msg_id, $2, $2 FROM s`, msgID, now, cutoff, TargetMailbox)
		repaired = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("finishing stranded applied message %d: %w", msgID, err)
	}
	if repaired {
		e.metrics.finished.Add(ctx, 1, stateAttr(StateSucceeded))
	}
	return repaired, nil
}

// repairTerminal writes the missing backfill intent of msgID if it is
// still terminal since before cutoff, unmarked and without an intent that
// is not SENT, checked after its row lock is held. It reports whether it
// did.
func (e *Engine) repairTerminal(ctx context.Context, msgID int64, cutoff time.Time) (bool, error) {
	var repaired bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := lockedExec(ctx, tx, msgID, `
			INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
			SELECT $4, ps.msg_id::text, ps.msg_id, $2, ps.finished_at FROM proc_state ps
			WHERE ps.msg_id=$1 AND ps.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
			  AND ps.finished_at < $3 AND ps.backfilled_at IS NULL
			  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.msg_id = ps.msg_id AND o.target = $4 AND o.state <> 'SENT')`,
			msgID, e.clock.Now(), cutoff, TargetMailbox)
		repaired = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("writing backfill intent of stranded message %d: %w", msgID, err)
	}
	return repaired, nil
}

// lockedExec locks the proc_state row of msgID and then runs sql, in one
// round trip: sql is a statement of its own, so its snapshot is taken once
// the lock is held and shows what the transaction that held the row before
// committed.
func lockedExec(ctx context.Context, tx pgx.Tx, msgID int64, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT 1 FROM proc_state WHERE msg_id=$1 FOR NO KEY UPDATE`, msgID)
	b.Queue(sql, args...)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return pgconn.CommandTag{}, fmt.Errorf("locking message %d: %w", msgID, err)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// RunMaintenance runs the record cleanup, then the history sweep, and
// records the run in maintenance_run with what each did. scheduledFor is
// the run-at occurrence the run serves.
func (e *Engine) RunMaintenance(ctx context.Context, scheduledFor time.Time) (MaintenanceResult, error) {
	var res MaintenanceResult
	var runID int64
	if err := e.inTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO maintenance_run (scheduled_for, started_at) VALUES ($1, $2) RETURNING id`,
			scheduledFor, e.clock.Now()).Scan(&runID)
	}); err != nil {
		return res, fmt.Errorf("recording maintenance run: %w", err)
	}
	var errs []error
	var err error
	if res.Cleanup, err = e.RunCleanup(ctx); err != nil {
		errs = append(errs, err)
	}
	if res.History, err = e.RunHistorySweep(ctx); err != nil {
		errs = append(errs, err)
	}
	if res.Purge, err = e.RunHistoryPurge(ctx); err != nil {
		errs = append(errs, err)
	}
	runErr := errors.Join(errs...)
	var errText *string
	if runErr != nil {
		s := clip.Text(runErr.Error())
		errText = &s
	}
	// Recorded with a fresh context: a run cut short by a shutdown still
	// leaves its counts.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	h := res.History
	if _, err := e.exec(rctx, `
		UPDATE maintenance_run SET finished_at=$2, records_deleted=$3, outbox_deleted=$4, flights_archived=$5,
			flights_skipped=$6, flights_failed=$7, tombstones=$8, error=$9
		WHERE id=$1`, runID, e.clock.Now(), res.Cleanup.Records, res.Cleanup.Outbox,
		h.Archived, h.Skipped, h.Failed, h.Tombstones, errText); err != nil {
		return res, errors.Join(runErr, fmt.Errorf("recording maintenance result: %w", err))
	}
	return res, runErr
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
				WHERE p.backfilled_at IS NOT NULL AND p.finished_at < $1
				  AND p.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
				  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.msg_id = p.msg_id AND o.state <> 'SENT')
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
				SELECT id FROM outbox
				WHERE msg_id IS NULL AND state = 'SENT' AND sent_at < $1 AND target IN ($3, $4, $5)
				LIMIT $2)`, res.Cutoff, batch, TargetFlightState, TargetMsg, TargetSchd)
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

// RunHistorySweep moves flights whose operation day is more than
// history-retention days before today (airport time) to flight_history
// (R-C11, INV-28, US-14). Each flight has its own transaction: lock the
// row with SKIP LOCKED (a flight a processing transaction holds is skipped
// until the next run, INV-18) re-checking the age, insert its history row,
// write the one deletion of a still-ACTIVE flight, and only then delete the
// live row. A failing flight is counted and logged and the others go on.
func (e *Engine) RunHistorySweep(ctx context.Context) (HistoryResult, error) {
	now := e.clock.Now()
	local := now.In(e.airportZone()).Add(-time.Duration(e.opt.CutoffHour) * time.Hour)
	y, m, d := local.Date()
	res := HistoryResult{Cutoff: time.Date(y, m, d-e.historyDays(), 0, 0, 0, 0, time.UTC)}
	var after int64
	for {
		rows, err := e.pool.Query(ctx, `SELECT flid FROM flight WHERE operation_day < $1 AND flid > $2 ORDER BY flid LIMIT $3`,
			res.Cutoff, after, sweepPage)
		if err != nil {
			return res, fmt.Errorf("listing flights due for history: %w", err)
		}
		flids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return res, fmt.Errorf("listing flights due for history: %w", err)
		}
		for _, flid := range flids {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("sweeping history: %w", err)
			}
			out, err := e.sweepFlight(ctx, flid, res.Cutoff, e.clock.Now())
			switch {
			case err != nil:
				res.Failed++
				e.log.Error("archiving flight failed; kept live until the next run", "flid", flid, "err", err, "alert", "history-sweep-failed")
			case out == sweptArchived:
				res.Archived++
			case out == sweptTombstoned:
				res.Archived++
				res.Tombstones++
			case out == sweptLocked:
				res.Skipped++
				e.log.Info("flight locked by processing; archived next run", "flid", flid)
			}
		}
		if len(flids) < sweepPage {
			break
		}
		after = flids[len(flids)-1]
	}
	e.log.Info("history sweep done", "archived", res.Archived, "tombstones", res.Tombstones,
		"skipped", res.Skipped, "failed", res.Failed, "operation_day_before", res.Cutoff.Format(time.DateOnly))
	return res, nil
}

// sweepOutcome is what happened to one flight in the sweep.
type sweepOutcome int

const (
	sweptGone       sweepOutcome = iota // deleted or no longer due meanwhile
	sweptArchived                       // archived and removed (already DELETED)
	sweptTombstoned                     // archived, removed, deletion emitted
	sweptLocked                         // held by a processing transaction
)

// sweepFlight archives and removes one flight in one transaction. A still
// ACTIVE code-share child leaves its master's MAFL: the master, when it
// stays live and ACTIVE, is rewritten in the same transaction (R-C8,
// INV-22); a master a processing transaction holds defers the child to the
// next run like a locked child.
func (e *Engine) sweepFlight(ctx context.Context, flid int64, cutoff, now time.Time) (sweepOutcome, error) {
	out := sweptGone
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		var (
			state   string
			version int64
			opDay   time.Time
			master  *int64
		)
		err := tx.QueryRow(ctx, `
			SELECT state, state_version, operation_day, master_flid FROM flight
			WHERE flid=$1 AND operation_day < $2 FOR UPDATE SKIP LOCKED`, flid, cutoff).Scan(&state, &version, &opDay, &master)
		if errors.Is(err, pgx.ErrNoRows) {
			// Either a processing transaction holds the row (a plain read
			// does not wait for row locks) or it is gone or no longer due.
			var due bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flight WHERE flid=$1 AND operation_day < $2)`, flid, cutoff).Scan(&due); err != nil {
				return fmt.Errorf("checking flight %d: %w", flid, err)
			}
			if due {
				out = sweptLocked
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("locking flight %d: %w", flid, err)
		}
		var m *sweptMaster
		if state == "ACTIVE" && master != nil && *master != flid {
			if m, err = lockSweptMaster(ctx, tx, *master); errors.Is(err, errMasterLocked) {
				out = sweptLocked
				return nil
			} else if err != nil {
				return err
			}
		}
		// History first (INV-28); a version already archived is not written
		// again.
		if _, err := tx.Exec(ctx, `
			INSERT INTO flight_history (flid, state_version, operation_day, state, master_flid, last_msg_id, doc, created_at, updated_at, archived_at)
			SELECT flid, state_version, operation_day, state, master_flid, last_msg_id, doc, created_at, updated_at, $2
			FROM flight WHERE flid=$1
			ON CONFLICT (flid, state_version) DO NOTHING`, flid, now); err != nil {
			return fmt.Errorf("archiving flight %d: %w", flid, err)
		}
		if state == "ACTIVE" {
			// Purged without FDEL: its consumers get exactly one deletion.
			if err := queueDeletion(ctx, tx, flid, version+1, opDay.Format(time.DateOnly), historySweepReason, now); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM flight WHERE flid=$1`, flid); err != nil {
			return fmt.Errorf("removing flight %d: %w", flid, err)
		}
		if m != nil {
			if err := m.refresh(ctx, tx, e.zone(), now); err != nil {
				return err
			}
		}
		out = sweptArchived
		if state == "ACTIVE" {
			out = sweptTombstoned
		}
		return nil
	})
	if err != nil {
		return sweptGone, err
	}
	return out, nil
}

// errMasterLocked means the master of a swept child is held by a
// processing transaction: the child waits for the next run (INV-18).
var errMasterLocked = errors.New("code-share master locked by processing")

// sweptMaster is the live ACTIVE master of a code-share child the history
// sweep purges, locked in the sweep's transaction.
type sweptMaster struct {
	flid, version, lastMsgID int64
	opDay                    *time.Time
	doc                      flight.Doc
}

// lockSweptMaster locks the master flid of a child being purged, without
// waiting (SKIP LOCKED, like the child). It returns nil when the master is
// gone or not ACTIVE (it has no MAFL to keep), errMasterLocked when a
// processing transaction holds it.
func lockSweptMaster(ctx context.Context, tx pgx.Tx, flid int64) (*sweptMaster, error) {
	var (
		m     = sweptMaster{flid: flid}
		state string
		doc   []byte
	)
	err := tx.QueryRow(ctx, `SELECT state, state_version, last_msg_id, operation_day, doc FROM flight WHERE flid=$1 FOR UPDATE SKIP LOCKED`, flid).
		Scan(&state, &m.version, &m.lastMsgID, &m.opDay, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flight WHERE flid=$1)`, flid).Scan(&exists); err != nil {
			return nil, fmt.Errorf("checking code-share master %d: %w", flid, err)
		}
		if exists {
			return nil, errMasterLocked
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("locking code-share master %d: %w", flid, err)
	}
	if state != "ACTIVE" {
		return nil, nil
	}
	if err := json.Unmarshal(doc, &m.doc); err != nil {
		return nil, fmt.Errorf("reading code-share master %d document: %w", flid, err)
	}
	return &m, nil
}

// refresh rewrites the master's MAFL from its ACTIVE children once the
// swept child's row is gone (R-C8, INV-21, INV-22): when it changed, the
// master gets the next version and its events — the msgx.flight-state
// record, FLIGHT_UPDATED with reason history-sweep and the schd record, in
// the contract's formats with SIS times read in zone — in the sweep's
// transaction, like the deletion it follows, with no message (msg_id
// NULL, no source, no pending projection; the flight-state record names
// the master's last message, as a projection rebuild does).
func (m *sweptMaster) refresh(ctx context.Context, tx pgx.Tx, zone *time.Location, now time.Time) error {
	rows, err := tx.Query(ctx, `SELECT flid, COALESCE(doc->>'FLNO', '') FROM flight
		WHERE master_flid=$1 AND state='ACTIVE' AND flid<>$1 ORDER BY flid`, m.flid)
	if err != nil {
		return fmt.Errorf("listing code-share children of %d: %w", m.flid, err)
	}
	kids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (flight.Child, error) {
		var c flight.Child
		err := r.Scan(&c.FLID, &c.FLNO)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("listing code-share children of %d: %w", m.flid, err)
	}
	doc := flight.Derive(m.doc, m.flid, kids)
	if flight.Equal(m.doc, doc) {
		return nil
	}
	version := m.version + 1
	canonical := doc.Canonical() // stored, and reused in the three payloads
	if _, err := tx.Exec(ctx, `UPDATE flight SET state_version=$2, doc=$3, updated_at=$4 WHERE flid=$1`,
		m.flid, version, canonical, now); err != nil {
		return fmt.Errorf("rewriting code-share master %d: %w", m.flid, err)
	}
	rec, err := flightstate.EncodeCanonical(m.flid, version, flightstate.StateActive, m.opDay, m.lastMsgID, doc, canonical)
	if err != nil {
		return err
	}
	day := ""
	if m.opDay != nil {
		day = m.opDay.Format(time.DateOnly)
	}
	change := contract.Change{FLID: m.flid, StateVersion: version, EventType: EventUpdated, OperationDay: day,
		Changed: decide.ChangedKeys(m.doc, doc), Reason: historySweepReason, OccurredAt: now, Flight: doc, FlightJSON: canonical}
	ev, st, err := contract.Encoder{Zone: zone}.Records(change)
	if err != nil {
		return err
	}
	key := strconv.FormatInt(m.flid, 10)
	if _, err := tx.Exec(ctx, `
		INSERT INTO outbox (target, pkey, payload, headers, next_attempt_at, created_at) VALUES
			($1, $4, $5, $6, $11, $11),
			($2, $4, $7, $8, $11, $11),
			($3, $4, $9, $10, $11, $11)`,
		TargetFlightState, TargetMsg, TargetSchd, key, rec.Value, mustJSON(rec.Headers),
		ev.Value, mustJSON(ev.Headers), st.Value, mustJSON(st.Headers), now); err != nil {
		return fmt.Errorf("writing events of code-share master %d: %w", m.flid, err)
	}
	return nil
}

// queueDeletion writes the outbox rows of a flight deletion that no message
// caused: the msgx.flight-state tombstone, the FLIGHT_DELETED event with
// its reason, and the schd tombstone, in the formats of writer.emit, with
// no msg_id. version is the deletion's version (the last one plus one).
func queueDeletion(ctx context.Context, q querier, flid, version int64, opDay, reason string, now time.Time) error {
	key := strconv.FormatInt(flid, 10)
	headers := mustJSON(map[string]string{"msgx-version": strconv.FormatInt(version, 10)})
	change := contract.Change{FLID: flid, StateVersion: version, EventType: EventDeleted, OperationDay: opDay,
		Changed: []string{}, Reason: reason, OccurredAt: now}
	ev, err := contract.Encoder{}.Msg(change) // a deletion has no SIS times: no zone needed
	if err != nil {
		return err
	}
	tomb, err := contract.Encoder{}.Schd(change)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `
		INSERT INTO outbox (target, pkey, payload, headers, next_attempt_at, created_at) VALUES
			($1, $4, NULL, $5, $7, $7),
			($2, $4, $6, $8, $7, $7),
			($3, $4, NULL, $9, $7, $7)`,
		TargetFlightState, TargetMsg, TargetSchd, key, headers, ev.Value, now,
		mustJSON(ev.Headers), mustJSON(tomb.Headers))
	if err != nil {
		return fmt.Errorf("writing deletion of flight %d: %w", flid, err)
	}
	return nil
}
