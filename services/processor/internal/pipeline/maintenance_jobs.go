package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
)

// Maintenance jobs, as maintenance_run.job and maintenance_request.job
// name them (migration 00032).
const (
	JobDaily        = "daily"
	JobCleanup      = "cleanup"
	JobHistorySweep = "history-sweep"
	JobHistoryPurge = "history-purge"
	JobSelfCheck    = "self-check"
)

// MaintenanceResult is what one maintenance run did: the daily run all of
// it, a requested job its part.
type MaintenanceResult struct {
	Cleanup CleanupResult
	History HistoryResult
	Purge   PurgeResult
}

// strandedDryRunLimit bounds the message IDs a dry run of the self-check
// lists per kind.
const strandedDryRunLimit = 1000

// RunMaintenance runs the record cleanup, then the history sweep and the
// history purge, and records the run in maintenance_run with what each
// did. scheduledFor is the run-at occurrence the run serves.
func (e *Engine) RunMaintenance(ctx context.Context, scheduledFor time.Time) (MaintenanceResult, error) {
	res, _, err := e.runJob(ctx, JobDaily, scheduledFor, 0)
	return res, err
}

// runJob runs job (daily, cleanup, history-sweep or history-purge) and
// records it in maintenance_run, with requestID when an operator's request
// asked for it (0: none). It returns what ran and the run's ID.
func (e *Engine) runJob(ctx context.Context, job string, scheduledFor time.Time, requestID int64) (MaintenanceResult, int64, error) {
	var res MaintenanceResult
	var runID int64
	if err := e.inTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO maintenance_run (scheduled_for, started_at, job, request_id) VALUES ($1, $2, $3, NULLIF($4, 0)) RETURNING id`,
			scheduledFor, e.clock.Now(), job, requestID).Scan(&runID)
	}); err != nil {
		return res, 0, fmt.Errorf("recording maintenance run: %w", err)
	}
	var errs []error
	var err error
	if job == JobDaily || job == JobCleanup {
		if res.Cleanup, err = e.RunCleanup(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if job == JobDaily || job == JobHistorySweep {
		if res.History, err = e.RunHistorySweep(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if job == JobDaily || job == JobHistoryPurge {
		if res.Purge, err = e.RunHistoryPurge(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	runErr := errors.Join(errs...)
	var errText *string
	if runErr != nil {
		s := clip.Text(runErr.Error())
		errText = &s
	}
	// Recorded with a fresh context: a run cut short by a shutdown still
	// leaves its counts. A job the run did not include leaves its counts
	// NULL.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cleanup, sweep := job == JobDaily || job == JobCleanup, job == JobDaily || job == JobHistorySweep
	h := res.History
	if _, err := e.exec(rctx, `
		UPDATE maintenance_run SET finished_at=$2,
			records_deleted=CASE WHEN $10 THEN $3::bigint END, outbox_deleted=CASE WHEN $10 THEN $4::bigint END,
			flights_archived=CASE WHEN $11 THEN $5::bigint END, flights_skipped=CASE WHEN $11 THEN $6::bigint END,
			flights_failed=CASE WHEN $11 THEN $7::bigint END, tombstones=CASE WHEN $11 THEN $8::bigint END, error=$9
		WHERE id=$1`, runID, e.clock.Now(), res.Cleanup.Records, res.Cleanup.Outbox,
		h.Archived, h.Skipped, h.Failed, h.Tombstones, errText, cleanup, sweep); err != nil {
		return res, runID, errors.Join(runErr, fmt.Errorf("recording maintenance result: %w", err))
	}
	return res, runID, runErr
}

// runMaintenanceRequests runs the operators' pending maintenance requests
// (migration 00032) in ID order and reports whether any ran. A request
// whose job fails is recorded FAILED with its error; a request that cannot
// be read or recorded is logged and tried again at the next poll (the jobs
// are idempotent: a real run that ran twice finds nothing the second
// time).
func (e *Engine) runMaintenanceRequests(ctx context.Context) bool {
	ran := false
	for ctx.Err() == nil {
		var (
			id     int64
			job    string
			dryRun bool
		)
		err := e.pool.QueryRow(ctx, `SELECT id, job, dry_run FROM maintenance_request WHERE state = 'PENDING' ORDER BY id LIMIT 1`).
			Scan(&id, &job, &dryRun)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ran
		case err != nil:
			if ctx.Err() == nil {
				e.log.Error("reading maintenance requests failed; next poll tries again", "err", err)
			}
			return ran
		}
		if err := e.RunMaintenanceRequest(ctx, id, job, dryRun); err != nil {
			if ctx.Err() == nil {
				e.log.Error("maintenance request not recorded; next poll runs it again", "request_id", id, "err", err)
			}
			return ran
		}
		ran = true
	}
	return ran
}

// RunMaintenanceRequest runs request id — job, or its dry run — and
// records the outcome on the request: DONE with what the job did (or would
// do), or FAILED with its error. Only a failure to record it is returned.
func (e *Engine) RunMaintenanceRequest(ctx context.Context, id int64, job string, dryRun bool) error {
	started := e.clock.Now()
	e.log.Info("maintenance request started", "request_id", id, "job", job, "dry_run", dryRun)
	result, runID, jobErr := e.maintenanceJob(ctx, id, job, dryRun)
	if ctx.Err() != nil {
		return ctx.Err() // cut short by a shutdown: run again after the restart
	}
	doc, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("encoding the result of maintenance request %d: %w", id, err)
	}
	state, errText := "DONE", (*string)(nil)
	if jobErr != nil {
		state = "FAILED"
		s := clip.Text(jobErr.Error())
		errText = &s
		e.log.Error("maintenance request failed", "request_id", id, "job", job, "dry_run", dryRun, "err", jobErr)
	} else {
		e.log.Info("maintenance request done", "request_id", id, "job", job, "dry_run", dryRun, "result", string(doc))
	}
	if _, err := e.exec(ctx, `
		UPDATE maintenance_request SET state=$2, started_at=$3, finished_at=$4, run_id=NULLIF($5, 0), result=$6, error=$7
		WHERE id=$1 AND state = 'PENDING'`, id, state, started, e.clock.Now(), runID, doc, errText); err != nil {
		return fmt.Errorf("recording maintenance request %d: %w", id, err)
	}
	return nil
}

// maintenanceJob runs or counts one requested job; result names what it
// did (or would do) for the request's result document.
func (e *Engine) maintenanceJob(ctx context.Context, requestID int64, job string, dryRun bool) (map[string]any, int64, error) {
	if job == JobSelfCheck {
		var res SelfCheckResult
		var err error
		if dryRun {
			res, err = e.FindStranded(ctx, strandedDryRunLimit)
		} else {
			res, err = e.RunSelfCheck(ctx)
		}
		return map[string]any{"cutoff": res.Cutoff, "applied_without_pending": nonNil(res.Applied),
			"terminal_without_intent": nonNil(res.Terminal)}, 0, err
	}
	if !dryRun {
		res, runID, err := e.runJob(ctx, job, e.clock.Now(), requestID)
		return jobResult(job, res), runID, err
	}
	var res MaintenanceResult
	var errs []error
	var err error
	if job == JobDaily || job == JobCleanup {
		if res.Cleanup, err = e.CountCleanup(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if job == JobDaily || job == JobHistorySweep {
		if res.History, err = e.CountHistorySweep(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if job == JobDaily || job == JobHistoryPurge {
		if res.Purge, err = e.CountHistoryPurge(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return jobResult(job, res), 0, errors.Join(errs...)
}

// jobResult is the result document of job: the counts of the parts it
// includes, with their cutoffs.
func jobResult(job string, res MaintenanceResult) map[string]any {
	out := map[string]any{}
	if job == JobDaily || job == JobCleanup {
		out["cleanup"] = map[string]any{"finished_before": res.Cleanup.Cutoff, "records": res.Cleanup.Records, "outbox_rows": res.Cleanup.Outbox}
	}
	if job == JobDaily || job == JobHistorySweep {
		h := res.History
		out["history_sweep"] = map[string]any{"operation_day_before": h.Cutoff.Format(time.DateOnly), "archived": h.Archived,
			"tombstones": h.Tombstones, "skipped": h.Skipped, "failed": h.Failed}
	}
	if job == JobDaily || job == JobHistoryPurge {
		p := res.Purge
		out["history_purge"] = map[string]any{"operation_day_before": p.Cutoff.Format(time.DateOnly), "flights": p.Flights,
			"snapshot_logs": p.SnapshotLogs}
	}
	return out
}

// nonNil shows an empty ID list as [] rather than null.
func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}
