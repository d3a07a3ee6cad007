package pipeline

import (
	"context"
	"fmt"
	"time"
)

// DefaultHistoryKeep is how long flight_history keeps a flight after its
// operation day when Options.HistoryKeep is 0: a year and a season, so a
// flight can be looked up against the same day of the previous year and
// the season it belonged to (G-FLIGHT-HIST-RETENTION).
const DefaultHistoryKeep = 400 * 24 * time.Hour

// historyArchivedKeep is how long a flight stays in flight_history after
// it was archived, whatever its operation day: the history is what
// continues a swept FLID's versions (R-L1), and it must outlive the
// projector's memory of the FLID's tombstone (7 days), also for a flight
// of a day already older than history.keep when it was swept.
const historyArchivedKeep = 30 * 24 * time.Hour

// SnapshotLogKeep is how long a row of snapshot_log is kept after its
// package finished (R-L7: the seeds' SCHD_SNAP_LOG keeps 90 days).
const SnapshotLogKeep = 90 * 24 * time.Hour

// historyPurgeDue is the condition on a flight_history row the purge
// deletes: operation day before $1, archived before $3.
const historyPurgeDue = `operation_day < $1 AND archived_at < $3`

// PurgeResult is what one purge of flight_history did.
type PurgeResult struct {
	// Cutoff is the first operation day whose history is kept.
	Cutoff time.Time
	// Flights is the number of history rows deleted.
	Flights int64
	// SnapshotLogs is the number of snapshot_log rows deleted: those of
	// packages finished more than SnapshotLogKeep ago.
	SnapshotLogs int64
}

// historyKeepDays is the flight_history retention in whole days.
func (e *Engine) historyKeepDays() int {
	d := e.opt.HistoryKeep
	if d <= 0 {
		d = DefaultHistoryKeep
	}
	return int(d / (24 * time.Hour))
}

// RunHistoryPurge deletes, in batches, the snapshot_log rows older than
// SnapshotLogKeep and the flight_history rows of
// operation days more than history.keep days before today (airport time)
// that were archived at least 30 days ago, so the table holds a bounded
// window instead of growing for ever (G-FLIGHT-HIST-RETENTION). The history is also the processor's memory of
// the versions a swept FLID published (R-L1): a FLID sent again after its
// history is purged starts at version 1 again, which only a consumer that
// remembers deleted flights for more than history.keep would drop.
func (e *Engine) RunHistoryPurge(ctx context.Context) (PurgeResult, error) {
	res := PurgeResult{Cutoff: e.airportDaysAgo(e.historyKeepDays())}
	batch := e.cleanupBatch()
	pacer := e.jobPacer()
	var err error
	res.Flights, err = e.deletePaced(ctx, pacer, batch, `
		DELETE FROM flight_history WHERE (flid, state_version) IN (
			SELECT flid, state_version FROM flight_history WHERE `+historyPurgeDue+` LIMIT $2)`,
		res.Cutoff, batch, e.clock.Now().Add(-historyArchivedKeep))
	if err != nil {
		return res, fmt.Errorf("purging flight history before %s: %w", res.Cutoff.Format(time.DateOnly), err)
	}
	logCutoff := e.clock.Now().Add(-SnapshotLogKeep)
	res.SnapshotLogs, err = e.deletePaced(ctx, pacer, batch, `
		DELETE FROM snapshot_log WHERE id IN (
			SELECT id FROM snapshot_log WHERE finished_at < $1 LIMIT $2)`, logCutoff, batch)
	if err != nil {
		return res, fmt.Errorf("purging the snapshot log before %s: %w", logCutoff.Format(time.RFC3339), err)
	}
	e.log.Info("flight history purge done", "deleted", res.Flights, "kept_from", res.Cutoff.Format(time.DateOnly),
		"snapshot_log_deleted", res.SnapshotLogs)
	return res, nil
}

// CountHistoryPurge is the purge's dry run (R-N9): how many flight_history
// and snapshot_log rows RunHistoryPurge would delete now, writing nothing.
func (e *Engine) CountHistoryPurge(ctx context.Context) (PurgeResult, error) {
	now := e.clock.Now()
	res := PurgeResult{Cutoff: e.airportDaysAgo(e.historyKeepDays())}
	err := e.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM flight_history WHERE `+historyPurgeDue+`),
			(SELECT count(*) FROM snapshot_log WHERE finished_at < $2)`,
		res.Cutoff, now.Add(-SnapshotLogKeep), now.Add(-historyArchivedKeep)).Scan(&res.Flights, &res.SnapshotLogs)
	if err != nil {
		return res, fmt.Errorf("counting flight history and snapshot log rows due for the purge: %w", err)
	}
	return res, nil
}
