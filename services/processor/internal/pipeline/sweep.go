package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/processor/internal/apply"
	"msgexchange/services/processor/internal/decide"
)

const (
	// DefaultHistoryRetention keeps a flight live for 3 days after its
	// operation day (R-C11).
	DefaultHistoryRetention = 3 * 24 * time.Hour

	// sweepPage is how many candidate FLIDs the history sweep reads at once.
	sweepPage = 500

	// defaultSweepStep is how many flights one paced step of the history
	// sweep archives (R-M5), in one transaction. Each flight is about 20 ms
	// of work under R-M5's load on the 2-core machine. A step of a whole
	// page (500 flights) ran 10 s there: its rest, capped at maxJobRest,
	// was as long as the step, so the sweep took half the time at a
	// job-share of 0.1, and the executor was held up to 2 s while a page
	// ran. Ten flights make a step as long as a cleanup batch.
	defaultSweepStep = 10

	// maxSweepStep caps Options.SweepStep: a step's flights are
	// subtransactions of one transaction (sweepFlights), and past 64 of
	// them a transaction overflows PostgreSQL's per-backend subtransaction
	// cache, which slows every snapshot taken in the database while it
	// runs.
	maxSweepStep = 50
)

func (e *Engine) sweepStep() int {
	if e.opt.SweepStep > 0 {
		return min(e.opt.SweepStep, maxSweepStep)
	}
	return defaultSweepStep
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

// historyDays is the history retention in whole days.
func (e *Engine) historyDays() int {
	d := e.opt.HistoryRetention
	if d <= 0 {
		d = DefaultHistoryRetention
	}
	return int(d / (24 * time.Hour))
}

// RunHistorySweep moves flights whose operation day is more than
// history-retention days before today (airport time) to flight_history
// (R-C11, INV-28, US-14). Each flight has its own savepoint in its step's
// transaction (sweepFlights): lock the row with SKIP LOCKED (a flight a
// processing transaction holds is skipped until the next run, INV-18)
// re-checking the age, insert its history row, write the one deletion of a
// still-ACTIVE flight, and only then delete the live row. A failing flight
// is counted and logged and the others go on.
func (e *Engine) RunHistorySweep(ctx context.Context) (HistoryResult, error) {
	res := HistoryResult{Cutoff: e.airportDaysAgo(e.historyDays())}
	pacer := e.jobPacer()
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
		// A few flights are one paced step (R-M5): the rest and the
		// yield to a pipeline that fell behind come between them.
		for step := range slices.Chunk(flids, e.sweepStep()) {
			if err := pacer.Step(ctx, func() error { return e.sweepFlights(ctx, step, &res) }); err != nil {
				return res, fmt.Errorf("sweeping history: %w", err)
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

// errStepLost marks a failure of a sweep step's transaction itself (a
// savepoint that could not be taken, released or rolled back to), as
// opposed to one flight's: the step ends and none of its flights commit.
var errStepLost = errors.New("the sweep step's transaction is lost")

// sweepOutcome is what sweeping one flight of a step came to.
type sweepOutcome struct {
	flid int64
	out  decide.Swept
	err  error
}

// sweepFlights sweeps the flights flids in one transaction of the daily
// job, each flight under a savepoint of its own, and counts their outcomes
// into res once it committed; only a stop ends it early.
//
// One commit per step rather than per flight (R-M5): every commit that
// wrote a tombstone takes PostgreSQL's notification-queue lock until its
// commit record is flushed (outbox inserts notify, migration 00036), and
// until migration 00038 every fenced commit held the lease row FOR SHARE
// until it ended, so the control plane's renewal, and the pipeline's
// fences queued behind it, waited for it. A year of history swept flight
// by flight made thousands of such commits beside the executor's, and its
// longest holds fell in them. The price is that a step's flights stay
// row-locked until the step commits (a step is about ten flights' work);
// a processing transaction that needs one of these old flights waits that
// long.
//
// The savepoint keeps a failing flight failing alone (INV-28): it is
// rolled back to its savepoint, counted and logged, and the step goes on.
// A step that cannot commit (the fence refused, the connection lost) keeps
// all its flights live, each counted as failed; the next run tries again.
// A step stays well under PostgreSQL's 64 cached subtransactions per
// transaction (maxSweepStep), past which every snapshot in the database
// gets slower.
func (e *Engine) sweepFlights(ctx context.Context, flids []int64, res *HistoryResult) error {
	var outcomes []sweepOutcome
	err := e.jobTx(ctx, func(tx pgx.Tx) error {
		for _, flid := range flids {
			if err := ctx.Err(); err != nil {
				return err
			}
			out, err := sweepFlight(ctx, tx, flid, res.Cutoff, e.clock.Now(), e.zone())
			if errors.Is(err, errStepLost) {
				return err
			}
			outcomes = append(outcomes, sweepOutcome{flid: flid, out: out, err: err})
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		res.Failed += len(flids)
		e.log.Error("archiving a step of flights failed; kept live until the next run", "flids", flids, "err", err, "alert", "history-sweep-failed")
		return nil
	}
	for _, o := range outcomes {
		switch {
		case o.err != nil:
			res.Failed++
			e.log.Error("archiving flight failed; kept live until the next run", "flid", o.flid, "err", o.err, "alert", "history-sweep-failed")
		case o.out == decide.SweptArchived:
			res.Archived++
		case o.out == decide.SweptTombstoned:
			res.Archived++
			res.Tombstones++
		case o.out == decide.SweptHeld:
			res.Skipped++
			e.log.Info("flight locked by processing; archived next run", "flid", o.flid)
		}
	}
	return nil
}

// airportDaysAgo is the date days before today in airport time (a day
// ending at the cutoff hour), as midnight UTC: the first operation day a
// retention of days keeps.
func (e *Engine) airportDaysAgo(days int) time.Time {
	local := e.clock.Now().In(e.airportZone()).Add(-time.Duration(e.opt.CutoffHour) * time.Hour)
	y, m, d := local.Date()
	return time.Date(y, m, d-days, 0, 0, 0, 0, time.UTC)
}

// CountHistorySweep is the sweep's dry run (R-N9): how many flights
// RunHistorySweep would archive now (Archived; Tombstones those still
// ACTIVE), writing nothing.
func (e *Engine) CountHistorySweep(ctx context.Context) (HistoryResult, error) {
	res := HistoryResult{Cutoff: e.airportDaysAgo(e.historyDays())}
	err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'ACTIVE') FROM flight WHERE operation_day < $1`,
		res.Cutoff).Scan(&res.Archived, &res.Tombstones)
	if err != nil {
		return res, fmt.Errorf("counting flights due for history: %w", err)
	}
	return res, nil
}

// sweepFlight archives and removes one flight of a step's transaction tx
// under a savepoint of its own (decide.Sweep over apply.Sweep): a failure
// rolls back this flight's writes only.
func sweepFlight(ctx context.Context, tx pgx.Tx, flid int64, cutoff, now time.Time, zone *time.Location) (decide.Swept, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return decide.SweptGone, fmt.Errorf("%w: flight %d: savepoint: %w", errStepLost, flid, err)
	}
	out, err := decide.Sweep(ctx, apply.Sweep{Tx: sp}, apply.Sweep{Tx: sp}, flid, cutoff, now, zone)
	if err != nil {
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return decide.SweptGone, fmt.Errorf("%w: %w (and rolling back to its savepoint: %w)", errStepLost, err, rbErr)
		}
		return decide.SweptGone, err
	}
	if err := sp.Commit(ctx); err != nil {
		return decide.SweptGone, fmt.Errorf("%w: flight %d: releasing its savepoint: %w", errStepLost, flid, err)
	}
	return out, nil
}
