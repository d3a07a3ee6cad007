package pipeline

import (
	"context"
	"time"

	"msgexchange/libs/lifecycle"
)

// Defaults of the daily schedule, used where Options leave them zero.
const (
	// DefaultHistoryRunAt is 03:30 airport time.
	DefaultHistoryRunAt = 3*time.Hour + 30*time.Minute

	defaultMaintenancePoll = time.Minute
)

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
// day at run-at, the self-check (R-H4) at start and then every self-check
// interval, and the operators' maintenance requests (R-N9) as it finds
// them, at least every MaintenancePoll. The next run times come from the injected clock,
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
			if e.runMaintenanceRequests(ctx) {
				// An operator's request ran: read the clock again.
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
