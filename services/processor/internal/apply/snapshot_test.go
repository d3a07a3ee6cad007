package apply

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/processor/internal/decide"
)

// TestSnapshot_R_C6_R_C7_ProgressOfTheCurrentRunAndTheMatchOfAnyRun: a
// step that leaves work stores its progress under the message's current
// run with its note as the message's reason, in one round trip; the next
// step reads it back. Progress written under another run (before an
// operator replay) is not resumed — its counters read as zero, so the
// replayed run starts from the first record — but the request the
// package's first batch matched is kept, so a replayed SCHD RESP is
// applied under it (R-C6, R-C7). Without progress a step starts from zero.
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
func TestSnapshot_R_C6_R_C7_ProgressOfTheCurrentRunAndTheMatchOfAnyRun(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	msg := base + 1
	started := t0.Add(-time.Minute)
	addMessage(t, tx, msg, &started, nil)
	s := Snapshot{Tx: tx, MsgID: msg, Now: t0}

	p, err := s.Progress(ctx)
	require.NoError(t, err)
	require.Equal(t, decide.Progress{}, p)

	saved := decide.Progress{Next: 2, Changed: 2, Deleted: 1, Batches: 1, Match: &decide.RequestMatch{ID: 7, Kind: decide.MatchExact}}
	require.NoError(t, s.SaveProgress(ctx, saved, "snapshot in progress"))
	var reason string
	var at, updated time.Time
	require.NoError(t, tx.QueryRow(ctx, `SELECT p.started_at, p.updated_at, m.reason FROM snapshot_progress p JOIN proc_state m USING (msg_id)
		WHERE msg_id=$1`, msg).Scan(&at, &updated, &reason))
	require.True(t, at.Equal(started), "stored under the current run: %s", at)
	require.True(t, updated.Equal(t0))
	require.Equal(t, "snapshot in progress", reason, "the open message shows the note")

	p, err = s.Progress(ctx)
	require.NoError(t, err)
	stored := &decide.RequestMatch{ID: 7, Kind: decide.MatchExact, Stored: true}
	require.Equal(t, decide.Progress{Next: 2, Changed: 2, Deleted: 1, Batches: 1, Match: stored}, p)

	exec(t, tx, `UPDATE proc_state SET processing_started_at=$2 WHERE msg_id=$1`, msg, t0) // an operator replay's run
	p, err = s.Progress(ctx)
	require.NoError(t, err)
	require.Equal(t, decide.Progress{Match: stored}, p, "an earlier run's counters are not resumed, its match is")

	require.NoError(t, s.SaveProgress(ctx, decide.Progress{Next: 1, Batches: 1}, "step"))
	p, err = s.Progress(ctx)
	require.NoError(t, err)
	require.Equal(t, decide.Progress{Next: 1, Batches: 1}, p, "a DNLD answers no request")
	require.NoError(t, s.ClearProgress(ctx))
	require.Zero(t, count(t, tx, `SELECT count(*) FROM snapshot_progress WHERE msg_id=$1`, msg))
}

// TestSnapshot_R_M6_R_C6_AbsentFlightsOfEveryCoveredDay: the flights a
// daily snapshot deletes are the ACTIVE flights of each operation day it
// covers — not only its first — that it does not carry, in ascending FLID
// up to the step's budget; not a deleted flight, nor one of a day it does
// not cover (R-C6, R-M6).
func TestSnapshot_R_M6_R_C6_AbsentFlightsOfEveryCoveredDay(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	day24, day25 := day23.AddDate(0, 0, 1), day23.AddDate(0, 0, 2)
	for flid, row := range map[int64]struct {
		day   time.Time
		state string
	}{
		base + 10: {day23, "ACTIVE"}, base + 11: {day23, "ACTIVE"}, base + 12: {day23, "DELETED"},
		base + 13: {day24, "ACTIVE"}, base + 14: {day24, "ACTIVE"}, base + 15: {day25, "ACTIVE"},
	} {
		addFlight(t, tx, flid, row.state, 1, 0, base, doc(flid))
		exec(t, tx, `UPDATE flight SET operation_day=$2 WHERE flid=$1`, flid, row.day)
	}
	s := Snapshot{Tx: tx}
	days, keep := []time.Time{day23, day24}, []int64{base + 10, base + 13}

	gone, err := s.AbsentFlights(ctx, days, keep, 10)
	require.NoError(t, err)
	// Only this transaction's flights are on these days: other tests'
	// transactions are never committed, and the sweep's committed flights
	// are of a day no other test reads (sweepDay).
	require.Equal(t, []int64{base + 11, base + 14}, gone)
	gone, err = s.AbsentFlights(ctx, days, keep, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{base + 11}, gone, "up to the budget")
}

// TestSnapshot_R_C2_INV12_OperationDaysOfTheStoredFlights: the stored
// operation day of each flight of the package that has one, in ascending
// FLID, read in one query — what a package is checked against so no
// flight moves to another day (R-C2, INV-12).
func TestSnapshot_R_C2_INV12_OperationDaysOfTheStoredFlights(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	addFlight(t, tx, base+11, "ACTIVE", 1, 0, base, doc(base+11))
	addFlight(t, tx, base+10, "DELETED", 2, 0, base, doc(base+10))
	addFlight(t, tx, base+12, "ACTIVE", 1, 0, base, doc(base+12))
	exec(t, tx, `UPDATE flight SET operation_day=NULL WHERE flid=$1`, base+12)
	got, err := Snapshot{Tx: tx}.OperationDays(ctx, []int64{base + 12, base + 11, base + 10, base + 13})
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i, flid := range []int64{base + 10, base + 11} {
		require.Equal(t, flid, got[i].FLID)
		require.True(t, got[i].Day.Equal(day23))
	}
}

// TestSnapshot_R_L7_LogsTheFinishedPackageFromItsRunsStart: the last step
// logs the package (days, records, changed, deleted, unchanged, batches,
// outcome) timed from the start of the message's current run, or from the
// step itself for a message with no run recorded (R-L7); whether its
// projections are pending decides that outcome (R-B7).
func TestSnapshot_R_L7_LogsTheFinishedPackageFromItsRunsStart(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	started := t0.Add(-time.Minute)
	addMessage(t, tx, base+1, &started, nil)
	addMessage(t, tx, base+2, nil, nil)
	days := []time.Time{day23, day23.AddDate(0, 0, 1)}
	sum := decide.SnapshotSummary{Styp: "RESP", Days: days, Records: 5, Changed: 3, Deleted: 1, Unchanged: 2, Batches: 3, Outcome: "APPLIED"}

	s := Snapshot{Tx: tx, MsgID: base + 1, Now: t0}
	pendingNow, err := s.ProjectionsPending(ctx)
	require.NoError(t, err)
	require.False(t, pendingNow)
	require.NoError(t, TxSink{Tx: tx}.Change(ctx, put(base+1, base+10, 1, doc(base+10), t0)))
	pendingNow, err = s.ProjectionsPending(ctx)
	require.NoError(t, err)
	require.True(t, pendingNow)

	require.NoError(t, s.LogSnapshot(ctx, sum))
	require.NoError(t, Snapshot{Tx: tx, MsgID: base + 2, Now: t0}.LogSnapshot(ctx, decide.SnapshotSummary{Styp: "DNLD", Days: days[:1], Batches: 1, Outcome: "SUCCEEDED"}))
	type logRow struct {
		Styp                                          string
		Days                                          []time.Time
		Records, Changed, Deleted, Unchanged, Batches int
		Started, Finished                             time.Time
		Outcome                                       string
	}
	read := func(msg int64) logRow {
		t.Helper()
		var r logRow
		require.NoError(t, tx.QueryRow(ctx, `SELECT styp, days, records, changed, deleted, unchanged, batches, started_at, finished_at, outcome
			FROM snapshot_log WHERE msg_id=$1`, msg).
			Scan(&r.Styp, &r.Days, &r.Records, &r.Changed, &r.Deleted, &r.Unchanged, &r.Batches, &r.Started, &r.Finished, &r.Outcome))
		r.Started, r.Finished = r.Started.UTC(), r.Finished.UTC()
		for i := range r.Days {
			r.Days[i] = r.Days[i].UTC()
		}
		return r
	}
	require.Equal(t, logRow{"RESP", days, 5, 3, 1, 2, 3, started, t0, "APPLIED"}, read(base+1))
	require.Equal(t, logRow{"DNLD", days[:1], 0, 0, 0, 0, 1, t0, t0, "SUCCEEDED"}, read(base+2))
}
