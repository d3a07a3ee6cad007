package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/decide"
)

// DefaultSnapshotBatch is how many records (flights written or deleted) one
// transaction of a daily snapshot holds when Options.SnapshotBatch is 0.
const DefaultSnapshotBatch = 200

// batchCommitted ends a handler that wrote one batch of a larger package:
// the executor commits the batch (state changes, events, progress) and
// leaves the message open, so the next step continues it (R-C6).
type batchCommitted struct {
	progress string
}

func (b *batchCommitted) Error() string { return "batch committed: " + b.progress }

// snapshotBatch is the configured batch size.
func (e *Engine) snapshotBatch() int {
	if e.opt.SnapshotBatch > 0 {
		return e.opt.SnapshotBatch
	}
	return DefaultSnapshotBatch
}

// checkOperationDays refuses a package that would move a stored flight to
// another operation day (INV-12, INV-19), with one query for all records.
func checkOperationDays(ctx context.Context, w *writer, recs []flight.Record, days []time.Time) error {
	flids := make([]int64, len(recs))
	want := make(map[int64]time.Time, len(recs))
	for i, r := range recs {
		flids[i] = r.FLID
		want[r.FLID] = days[i]
	}
	rows, err := w.tx.Query(ctx, `SELECT flid, operation_day FROM flight WHERE flid = ANY($1) AND operation_day IS NOT NULL ORDER BY flid`, flids)
	if err != nil {
		return fmt.Errorf("reading operation days: %w", err)
	}
	type stored struct {
		flid int64
		day  time.Time
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stored, error) {
		var s stored
		err := r.Scan(&s.flid, &s.day)
		return s, err
	})
	if err != nil {
		return fmt.Errorf("reading operation days: %w", err)
	}
	for _, s := range got {
		if d := want[s.flid]; !s.day.Equal(d) {
			return decide.OperationDayMoved(s.flid, s.day, d)
		}
	}
	return nil
}

// snapshotProgress is the snapshot_progress row of a message.
type snapshotProgress struct {
	next, changed, deleted, batches int
	// match is the RQFD request an SCHD RESP answers, matched by the step
	// that wrote the package's first batch (R-C7); nil for a DNLD, and for
	// a RESP before its first batch committed.
	match *requestMatch
}

// loadProgress returns the progress of the current run of the message, or
// zero progress. Counters written under another processing_started_at (a
// run before an operator replay) are ignored: that run starts from the
// first record. The request match is kept whatever the run: the message
// answered that request when its first batch was written, and a later run
// finishes the same answer.
func loadProgress(ctx context.Context, w *writer) (snapshotProgress, error) {
	var (
		p         snapshotProgress
		current   bool
		requestID *int64
		matchKind *string
	)
	err := w.tx.QueryRow(ctx, `
		SELECT sp.next_record, sp.changed, sp.deleted, sp.batches,
		       sp.started_at IS NOT DISTINCT FROM ps.processing_started_at, sp.request_id, sp.match_kind
		FROM snapshot_progress sp JOIN proc_state ps ON ps.msg_id = sp.msg_id
		WHERE sp.msg_id=$1`, w.msgID).
		Scan(&p.next, &p.changed, &p.deleted, &p.batches, &current, &requestID, &matchKind)
	if errors.Is(err, pgx.ErrNoRows) {
		return snapshotProgress{}, nil
	}
	if err != nil {
		return snapshotProgress{}, fmt.Errorf("reading snapshot progress: %w", err)
	}
	if !current {
		p = snapshotProgress{}
	}
	if requestID != nil && matchKind != nil {
		p.match = &requestMatch{ID: *requestID, Kind: *matchKind, Stored: true}
	}
	return p, nil
}

// saveProgress stores the progress, and the request match of a RESP, with
// the batch that made it, and shows it as the open message's reason.
func saveProgress(ctx context.Context, w *writer, p snapshotProgress, total int) (string, error) {
	note := fmt.Sprintf("snapshot in progress: %d of %d records written, %d changed, %d deleted, %d batches committed",
		p.next, total, p.changed, p.deleted, p.batches)
	var requestID *int64
	var matchKind *string
	if p.match != nil {
		requestID, matchKind = &p.match.ID, &p.match.Kind
		note += fmt.Sprintf("; answers RQFD request %d (%s match)", p.match.ID, p.match.Kind)
	}
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO snapshot_progress (msg_id, started_at, next_record, changed, deleted, batches, updated_at, request_id, match_kind)
		SELECT msg_id, processing_started_at, $2, $3, $4, $5, $6, $7, $8 FROM proc_state WHERE msg_id=$1
		ON CONFLICT (msg_id) DO UPDATE SET started_at=EXCLUDED.started_at, next_record=EXCLUDED.next_record,
			changed=EXCLUDED.changed, deleted=EXCLUDED.deleted, batches=EXCLUDED.batches, updated_at=EXCLUDED.updated_at,
			request_id=EXCLUDED.request_id, match_kind=EXCLUDED.match_kind`,
		w.msgID, p.next, p.changed, p.deleted, p.batches, w.now, requestID, matchKind)
	b.Queue(`UPDATE proc_state SET reason=$2, updated_at=$3 WHERE msg_id=$1`, w.msgID, note, w.now)
	if err := w.tx.SendBatch(ctx, b).Close(); err != nil {
		return "", fmt.Errorf("saving snapshot progress: %w", err)
	}
	return note, nil
}

// snapshot applies a daily snapshot (SCHD DNLD, and SCHD RESP answering an
// RQFD request) in batches (R-C6, US-07, INV-15b, INV-17b):
//
//  1. the whole package is validated first, on every run (RECS, required
//     elements, FLID unique, no flight changing operation day); a violation
//     is DEAD(PROTOCOL) with nothing written;
//  2. records are written Options.SnapshotBatch at a time (children before
//     masters, see writeOrder), one transaction per batch with their
//     events and the progress row; each record replaces its flight's
//     document, clearing absent optional fields (C-26); the message stays
//     open between batches;
//  3. then the ACTIVE flights of the covered operation days that the
//     snapshot lacks are deleted, batch by batch, with their code-share
//     children that the snapshot does not carry (C-25);
//  4. the last batch writes the terminal state and backfill intent
//     (APPLIED while any of the package's projections is pending, decided
//     under the message's row lock, see markApplied).
//
// A crash or failure between batches redoes the package from the stored
// progress (or from its start if the progress is lost): records already
// written compare equal and bump nothing (INV-13, INV-20b).
func (e *Engine) snapshot(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	p, err := loadProgress(ctx, w)
	if err != nil {
		return outcome{}, err
	}
	return e.applySnapshot(ctx, w, msg, p)
}

// applySnapshot is snapshot from the loaded progress p, whose request
// match (a RESP's, see scheduleResponse) is saved with every batch.
func (e *Engine) applySnapshot(ctx context.Context, w *writer, msg *sis.Message, p snapshotProgress) (outcome, error) {
	recs, days, err := decide.SnapshotRecords(msg, e.opday)
	if err != nil {
		return outcome{}, err
	}
	if err := checkOperationDays(ctx, w, recs, days); err != nil {
		return outcome{}, err
	}
	order := decide.WriteOrder(recs)
	inSnapshot := make(map[int64]bool, len(recs))
	covered := map[time.Time]bool{}
	for i, r := range recs {
		inSnapshot[r.FLID] = true
		covered[days[i]] = true
	}
	budget := e.snapshotBatch()
	if p.next < len(order) {
		end := min(p.next+budget, len(order))
		for _, i := range order[p.next:end] {
			r := recs[i]
			cur, err := w.Load(ctx, r.FLID)
			if err != nil {
				return outcome{}, err
			}
			ok, err := w.Put(ctx, cur, r.FLID, r.Doc, &days[i])
			if err != nil {
				return outcome{}, err
			}
			if ok {
				p.changed++
			}
		}
		// Masters this package writes later compute their MAFL then.
		w.Hold = map[int64]bool{}
		for _, i := range order[end:] {
			w.Hold[recs[i].FLID] = true
		}
		err := w.FlushMasters(ctx)
		w.Hold = nil
		if err != nil {
			return outcome{}, err
		}
		budget -= end - p.next
		p.next = end
		if p.next < len(order) {
			return commitBatch(ctx, w, p, len(order))
		}
	}
	dayList := make([]time.Time, 0, len(covered))
	for d := range covered {
		dayList = append(dayList, d)
	}
	sort.Slice(dayList, func(i, j int) bool { return dayList[i].Before(dayList[j]) })
	n, more, err := e.deleteAbsent(ctx, w, dayList, inSnapshot, budget)
	if err != nil {
		return outcome{}, err
	}
	p.deleted += n
	if more {
		return commitBatch(ctx, w, p, len(order))
	}
	if _, err := w.tx.Exec(ctx, `DELETE FROM snapshot_progress WHERE msg_id=$1`, w.msgID); err != nil {
		return outcome{}, fmt.Errorf("clearing snapshot progress: %w", err)
	}
	// Whether the earlier batches' projections are still pending. The read
	// takes no lock, so an ack committing meanwhile can make a true stale;
	// markApplied decides again under the message's row lock (R-H4). A false
	// is final: only this message's own transactions add its projections.
	var pending bool
	if err := w.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projection_pending WHERE msg_id=$1)`, w.msgID).Scan(&pending); err != nil {
		return outcome{}, fmt.Errorf("reading pending projections: %w", err)
	}
	note := fmt.Sprintf("snapshot: %d records, %d changed, %d deleted, %d days", len(recs), p.changed, p.deleted, len(dayList))
	if p.batches > 0 {
		note += fmt.Sprintf(", %d batches", p.batches+1)
	}
	return outcome{note: note, pending: pending}, nil
}

// deleteAbsent deletes up to budget ACTIVE flights of the covered days that
// the snapshot does not carry, each with its ACTIVE code-share children the
// snapshot does not carry (C-25; a child the snapshot carries stays: the
// snapshot is the AODB's word for it). It reports how many flights it
// deleted and whether more remain. At least one flight is deleted per call
// when any remains, so a batch always makes progress.
func (e *Engine) deleteAbsent(ctx context.Context, w *writer, days []time.Time, inSnapshot map[int64]bool, budget int) (int, bool, error) {
	if len(days) == 0 {
		return 0, false, nil
	}
	keep := make([]int64, 0, len(inSnapshot))
	for f := range inSnapshot {
		keep = append(keep, f)
	}
	rows, err := w.tx.Query(ctx, `SELECT flid FROM flight WHERE state='ACTIVE' AND operation_day = ANY($1) AND NOT (flid = ANY($2))
		ORDER BY flid LIMIT $3`, days, keep, max(budget, 1)+1)
	if err != nil {
		return 0, false, fmt.Errorf("listing flights absent from the snapshot: %w", err)
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, false, fmt.Errorf("listing flights absent from the snapshot: %w", err)
	}
	more := len(gone) > max(budget, 1)
	if more {
		gone = gone[:max(budget, 1)]
	}
	if budget <= 0 && len(gone) > 0 {
		// The batch is full: the deletions start in the next one.
		return 0, true, nil
	}
	deleted := 0
	for _, flid := range gone {
		n, err := e.deleteWithChildren(ctx, w, flid, func(c int64) bool { return !inSnapshot[c] })
		if err != nil {
			return 0, false, err
		}
		deleted += n
	}
	if err := w.FlushMasters(ctx); err != nil {
		return 0, false, err
	}
	return deleted, more, nil
}

// commitBatch ends a step that wrote one batch and leaves the rest of the
// package for the next step.
func commitBatch(ctx context.Context, w *writer, p snapshotProgress, total int) (outcome, error) {
	p.batches++
	note, err := saveProgress(ctx, w, p, total)
	if err != nil {
		return outcome{}, err
	}
	return outcome{}, &batchCommitted{progress: note}
}
