package decide

import (
	"context"
	"fmt"
	"sort"
	"time"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// Progress is how far the current run of a daily snapshot got: records
// written (Next, in write order), flights changed and deleted, batches
// committed, and the RQFD request an SCHD RESP answers (matched by the
// step that wrote the package's first batch, R-C7; nil for a DNLD).
type Progress struct {
	Next, Changed, Deleted, Batches int
	Match                           *RequestMatch
}

// Note is the reason an open message shows while its package is written.
func (p Progress) Note(total int) string {
	note := fmt.Sprintf("snapshot in progress: %d of %d records written, %d changed, %d deleted, %d batches committed",
		p.Next, total, p.Changed, p.Deleted, p.Batches)
	if p.Match != nil {
		note += fmt.Sprintf("; answers RQFD request %d (%s match)", p.Match.ID, p.Match.Kind)
	}
	return note
}

// StoredDay is the operation day stored for a flight.
type StoredDay struct {
	FLID int64
	Day  time.Time
}

// SnapshotView is what a daily snapshot reads besides View: its progress
// and the flights of its operation days, each in one read however large
// the package.
type SnapshotView interface {
	// Progress returns the progress of the message's current run, or zero
	// progress. Counters of an earlier run (before an operator replay) are
	// not returned, so that run starts from the first record; a stored
	// request match is returned whatever the run.
	Progress(ctx context.Context) (Progress, error)
	// OperationDays returns the stored operation day of those of flids that
	// have one, in ascending FLID.
	OperationDays(ctx context.Context, flids []int64) ([]StoredDay, error)
	// AbsentFlights returns up to limit ACTIVE flights of days whose FLID
	// is not in keep, in ascending FLID.
	AbsentFlights(ctx context.Context, days []time.Time, keep []int64, limit int) ([]int64, error)
	// ProjectionsPending reports whether any projection of the message is
	// pending, without a lock: an ack committing meanwhile can make a true
	// stale (the pipeline decides again under the message's row lock,
	// R-H4); a false is final, since only the message's own transactions
	// add its projections.
	ProjectionsPending(ctx context.Context) (bool, error)
}

// SnapshotSink receives a snapshot's progress writes.
type SnapshotSink interface {
	// SaveProgress stores p with the batch that made it and shows note as
	// the open message's reason.
	SaveProgress(ctx context.Context, p Progress, note string) error
	// ClearProgress removes the progress once the package is written.
	ClearProgress(ctx context.Context) error
	// LogSnapshot records the finished package in the snapshot log
	// (R-L7), with the last step's transaction.
	LogSnapshot(ctx context.Context, sum SnapshotSummary) error
}

// SnapshotSummary is what the snapshot log keeps of a finished package.
type SnapshotSummary struct {
	// Styp is the message's subtype (DNLD, RESP).
	Styp                                          string
	Days                                          []time.Time
	Records, Changed, Deleted, Unchanged, Batches int
	// Outcome is the message's state after the last step: APPLIED while
	// projections of the package are pending, else SUCCEEDED.
	Outcome string
}

// Snapshot applies one transaction's share of a daily snapshot (SCHD DNLD,
// and SCHD RESP answering an RQFD request) from progress p, writing at
// most budget records or deletions (R-C6, US-07, INV-15b, INV-17b):
//
//  1. the whole package is validated first, on every run (RECS, required
//     elements, FLID unique, no flight changing operation day); a
//     violation is DEAD(PROTOCOL) with nothing written;
//  2. records are written budget at a time (children before masters, see
//     WriteOrder); each replaces its flight's document, clearing absent
//     optional fields (C-26); masters this package writes in a later
//     batch keep their MAFL until then;
//  3. then the ACTIVE flights of the covered operation days that the
//     snapshot lacks are deleted, budget at a time, with their code-share
//     children that the snapshot does not carry (C-25);
//  4. a step that leaves work saves the progress (with p's request match)
//     and returns an Outcome whose Continue is the progress note: the
//     pipeline commits the batch and leaves the message open. The last
//     step clears the progress and returns the package's note.
//
// A crash or failure between batches redoes the package from the stored
// progress (or from its start if it is lost): records already written
// compare equal and bump nothing (INV-13, INV-20b).
func Snapshot(ctx context.Context, w *Writer, v SnapshotView, s SnapshotSink, msg *sis.Message, od flight.OpDay, p Progress, budget int) (Outcome, error) {
	plan, err := planSnapshot(ctx, v, msg, od, SnapshotRecords) // planned at each step: msg is only read
	if err != nil {
		return Outcome{}, err
	}
	return SnapshotStep(ctx, w, v, s, plan, p, budget)
}

// SnapshotPlan is a daily snapshot read, validated and ordered: what every
// step of the package needs besides its progress. Making it costs time
// linear in the package (decoding the records, one read of the stored
// operation days); a caller that keeps it for the message's later steps
// makes the whole package cost linear in its size instead of quadratic
// (R-K4).
type SnapshotPlan struct {
	// Msg is the message the plan was made from.
	Msg        *sis.Message
	recs       []flight.Record
	days       []time.Time
	order      []int
	inSnapshot map[int64]bool
	dayList    []time.Time
}

// Records is how many flight records the package carries.
func (pl *SnapshotPlan) Records() int { return len(pl.recs) }

// PlanSnapshot reads and validates the whole package (step 1 of Snapshot):
// a violation is returned as a *flight.RejectError, nothing written. The
// validation holds for the message's later steps as long as only the
// message itself writes flights meanwhile, which the FIFO guarantees.
//
// It takes the FLTR records out of msg as it reads them
// (takeSnapshotRecords), whatever the outcome: the plan holds them from
// then on, and msg keeps its envelope and the SCHD's other elements. A
// caller that plans the package again decodes its text again.
func PlanSnapshot(ctx context.Context, v SnapshotView, msg *sis.Message, od flight.OpDay) (*SnapshotPlan, error) {
	return planSnapshot(ctx, v, msg, od, takeSnapshotRecords)
}

// planSnapshot is PlanSnapshot reading the records with read.
func planSnapshot(ctx context.Context, v SnapshotView, msg *sis.Message, od flight.OpDay,
	read func(*sis.Message, flight.OpDay) ([]flight.Record, []time.Time, error)) (*SnapshotPlan, error) {
	recs, days, err := read(msg, od)
	if err != nil {
		return nil, err
	}
	if err := checkStoredDays(ctx, v, recs, days); err != nil {
		return nil, err
	}
	pl := &SnapshotPlan{Msg: msg, recs: recs, days: days, order: WriteOrder(recs), inSnapshot: make(map[int64]bool, len(recs))}
	covered := map[time.Time]bool{}
	for i, r := range recs {
		pl.inSnapshot[r.FLID] = true
		covered[days[i]] = true
	}
	pl.dayList = make([]time.Time, 0, len(covered))
	for d := range covered {
		pl.dayList = append(pl.dayList, d)
	}
	sort.Slice(pl.dayList, func(i, j int) bool { return pl.dayList[i].Before(pl.dayList[j]) })
	return pl, nil
}

// SnapshotStep applies one transaction's share of the planned package from
// progress p (steps 2 to 4 of Snapshot). The plan is only read.
func SnapshotStep(ctx context.Context, w *Writer, v SnapshotView, s SnapshotSink, pl *SnapshotPlan, p Progress, budget int) (Outcome, error) {
	recs, days, order, inSnapshot, dayList := pl.recs, pl.days, pl.order, pl.inSnapshot, pl.dayList
	if p.Next < len(order) {
		end := min(p.Next+budget, len(order))
		flids := make([]int64, 0, end-p.Next)
		for _, i := range order[p.Next:end] {
			flids = append(flids, recs[i].FLID)
		}
		if err := w.Preload(ctx, flids); err != nil {
			return Outcome{}, err
		}
		for _, i := range order[p.Next:end] {
			r := recs[i]
			cur, err := w.Load(ctx, r.FLID)
			if err != nil {
				return Outcome{}, err
			}
			ok, err := w.Put(ctx, cur, r.FLID, r.Doc, &days[i])
			if err != nil {
				return Outcome{}, err
			}
			if ok {
				p.Changed++
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
			return Outcome{}, err
		}
		budget -= end - p.Next
		p.Next = end
		if p.Next < len(order) {
			return commitBatch(ctx, s, p, len(order))
		}
	}
	n, more, err := deleteAbsent(ctx, w, v, dayList, inSnapshot, budget)
	if err != nil {
		return Outcome{}, err
	}
	p.Deleted += n
	if more {
		return commitBatch(ctx, s, p, len(order))
	}
	if err := s.ClearProgress(ctx); err != nil {
		return Outcome{}, err
	}
	pending, err := v.ProjectionsPending(ctx)
	if err != nil {
		return Outcome{}, err
	}
	sum := SnapshotSummary{Styp: pl.Msg.Meta.STYP, Days: dayList, Records: len(recs), Changed: p.Changed, Deleted: p.Deleted,
		Unchanged: len(recs) - p.Changed, Batches: p.Batches + 1, Outcome: "SUCCEEDED"}
	if pending || w.Projections() > 0 {
		sum.Outcome = "APPLIED"
	}
	if err := s.LogSnapshot(ctx, sum); err != nil {
		return Outcome{}, err
	}
	note := fmt.Sprintf("snapshot: %d records, %d changed, %d deleted, %d days", len(recs), p.Changed, p.Deleted, len(dayList))
	if p.Batches > 0 {
		note += fmt.Sprintf(", %d batches", p.Batches+1)
	}
	return Outcome{Note: note, Pending: pending}, nil
}

// checkStoredDays refuses a package that would move a stored flight to
// another operation day (INV-12, INV-19), reporting the smallest such
// FLID, with one read for all records.
func checkStoredDays(ctx context.Context, v SnapshotView, recs []flight.Record, days []time.Time) error {
	flids := make([]int64, len(recs))
	want := make(map[int64]time.Time, len(recs))
	for i, r := range recs {
		flids[i] = r.FLID
		want[r.FLID] = days[i]
	}
	stored, err := v.OperationDays(ctx, flids)
	if err != nil {
		return err
	}
	for _, s := range stored {
		if d := want[s.FLID]; !s.Day.Equal(d) {
			return OperationDayMoved(s.FLID, s.Day, d)
		}
	}
	return nil
}

// deleteAbsent deletes up to budget ACTIVE flights of the covered days that
// the snapshot does not carry, each with its ACTIVE code-share children the
// snapshot does not carry (C-25; a child the snapshot carries stays: the
// snapshot is the AODB's word for it). It reports how many flights it
// deleted and whether more remain. At least one flight is deleted per call
// when any remains and the records left budget, so a batch always makes
// progress.
func deleteAbsent(ctx context.Context, w *Writer, v SnapshotView, days []time.Time, inSnapshot map[int64]bool, budget int) (int, bool, error) {
	if len(days) == 0 {
		return 0, false, nil
	}
	keep := make([]int64, 0, len(inSnapshot))
	for f := range inSnapshot {
		keep = append(keep, f)
	}
	gone, err := v.AbsentFlights(ctx, days, keep, max(budget, 1)+1)
	if err != nil {
		return 0, false, err
	}
	more := len(gone) > max(budget, 1)
	if more {
		gone = gone[:max(budget, 1)]
	}
	if budget <= 0 && len(gone) > 0 {
		// The batch is full: the deletions start in the next one.
		return 0, true, nil
	}
	if err := w.Preload(ctx, gone); err != nil {
		return 0, false, err
	}
	deleted := 0
	for _, flid := range gone {
		n, err := DeleteWithChildren(ctx, w, flid, func(c int64) bool { return !inSnapshot[c] })
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
func commitBatch(ctx context.Context, s SnapshotSink, p Progress, total int) (Outcome, error) {
	p.Batches++
	note := p.Note(total)
	if err := s.SaveProgress(ctx, p, note); err != nil {
		return Outcome{}, err
	}
	return Outcome{Continue: note}, nil
}
