package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/libs/lifecycle"
)

// Defaults of the daily schedule, used where Options leave them zero.
const (
	// DefaultHistoryRunAt is 03:30 airport time.
	DefaultHistoryRunAt = 3*time.Hour + 30*time.Minute

	defaultMaintenancePoll = time.Minute
)

// MaintenanceResult is one daily maintenance run.
type MaintenanceResult struct {
	Cleanup CleanupResult
	History HistoryResult
	Purge   PurgeResult
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
