package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// snapshotRecords validates a whole SCHD package before anything is written
// (R-C6, INV-19): every FLTR valid, RECS matching the records, no FLID twice.
func (e *Engine) snapshotRecords(msg *sis.Message) ([]flight.Record, []time.Time, error) {
	schd := msg.Root.Child("SCHD")
	fltrs := schd.ChildrenNamed("FLTR")
	if recs := schd.Child("RECS"); recs != nil && recs.Value() != "" {
		n, err := strconv.Atoi(recs.Value())
		if err != nil || n != len(fltrs) {
			return nil, nil, &flight.RejectError{Reason: fmt.Sprintf("SCHD declares RECS %q but carries %d FLTR records", recs.Value(), len(fltrs))}
		}
	}
	out := make([]flight.Record, 0, len(fltrs))
	days := make([]time.Time, 0, len(fltrs))
	seen := map[int64]bool{}
	for _, f := range fltrs {
		r, err := flight.FromFLTR(f, e.opday)
		if err != nil {
			return nil, nil, err
		}
		if seen[r.FLID] {
			return nil, nil, &flight.RejectError{Reason: fmt.Sprintf("SCHD carries FLID %d twice", r.FLID)}
		}
		seen[r.FLID] = true
		day, _ := e.opday.Of(r.Doc.String("SODT")) // validated by FromFLTR
		out = append(out, r)
		days = append(days, day)
	}
	return out, days, nil
}

// snapshot applies a daily snapshot (SCHD DNLD): every record replaces its
// flight's document (absent optional fields are cleared, C-26), and ACTIVE
// flights of the covered operation days that the snapshot lacks are deleted
// (INV-15b). A flight may not move to another operation day (INV-12): the
// whole package is refused and nothing written.
func (e *Engine) snapshot(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	recs, days, err := e.snapshotRecords(msg)
	if err != nil {
		return outcome{}, err
	}
	rows := make([]*flightRow, len(recs))
	inSnapshot := map[int64]bool{}
	covered := map[time.Time]bool{}
	for i, r := range recs {
		cur, err := w.load(ctx, r.FLID)
		if err != nil {
			return outcome{}, err
		}
		if cur != nil && cur.OpDay != nil && !cur.OpDay.Equal(days[i]) {
			return outcome{}, &flight.RejectError{Reason: fmt.Sprintf("flight %d would move from operation day %s to %s",
				r.FLID, cur.OpDay.Format(time.DateOnly), days[i].Format(time.DateOnly))}
		}
		rows[i] = cur
		inSnapshot[r.FLID] = true
		covered[days[i]] = true
	}
	changed := 0
	for i, r := range recs {
		ok, err := w.put(ctx, rows[i], r.FLID, r.Doc, &days[i])
		if err != nil {
			return outcome{}, err
		}
		if ok {
			changed++
		}
	}
	dayList := make([]time.Time, 0, len(covered))
	for d := range covered {
		dayList = append(dayList, d)
	}
	sort.Slice(dayList, func(i, j int) bool { return dayList[i].Before(dayList[j]) })
	deleted := 0
	if len(dayList) > 0 {
		rowsq, err := w.tx.Query(ctx, `SELECT flid FROM flight WHERE state='ACTIVE' AND operation_day = ANY($1) ORDER BY flid`, dayList)
		if err != nil {
			return outcome{}, fmt.Errorf("listing flights of the snapshot days: %w", err)
		}
		var gone []int64
		for rowsq.Next() {
			var flid int64
			if err := rowsq.Scan(&flid); err != nil {
				rowsq.Close()
				return outcome{}, fmt.Errorf("reading flight id: %w", err)
			}
			if !inSnapshot[flid] {
				gone = append(gone, flid)
			}
		}
		rowsq.Close()
		if err := rowsq.Err(); err != nil {
			return outcome{}, fmt.Errorf("listing flights of the snapshot days: %w", err)
		}
		for _, flid := range gone {
			cur, err := w.load(ctx, flid)
			if err != nil {
				return outcome{}, err
			}
			if ok, err := w.remove(ctx, cur); err != nil {
				return outcome{}, err
			} else if ok {
				deleted++
			}
		}
	}
	return outcome{note: fmt.Sprintf("snapshot: %d records, %d changed, %d deleted, %d days", len(recs), changed, deleted, len(dayList))}, nil
}

// snapshotUpsert applies SCHD records without deleting others (ADD, UPD,
// ADFT): each creates or replaces one flight (R-C9).
func (e *Engine) snapshotUpsert(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	recs, days, err := e.snapshotRecords(msg)
	if err != nil {
		return outcome{}, err
	}
	changed := 0
	for i, r := range recs {
		cur, err := w.load(ctx, r.FLID)
		if err != nil {
			return outcome{}, err
		}
		if cur != nil && cur.OpDay != nil && !cur.OpDay.Equal(days[i]) {
			return outcome{}, &flight.RejectError{Reason: fmt.Sprintf("flight %d would move to another operation day", r.FLID)}
		}
		ok, err := w.put(ctx, cur, r.FLID, r.Doc, &days[i])
		if err != nil {
			return outcome{}, err
		}
		if ok {
			changed++
		}
	}
	return outcome{note: fmt.Sprintf("%d records, %d changed", len(recs), changed)}, nil
}

// snapshotDelete deletes the flights named by FLID in SCHD DEL records.
func (e *Engine) snapshotDelete(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	deleted := 0
	for _, f := range msg.Root.Child("SCHD").ChildrenNamed("FLTR") {
		flid, err := strconv.ParseInt(f.Child("FLID").Value(), 10, 64)
		if err != nil {
			return outcome{}, &flight.RejectError{Reason: fmt.Sprintf("SCHD DEL: FLID %q is not an integer", f.Child("FLID").Value())}
		}
		n, err := e.deleteCascade(ctx, w, flid)
		if err != nil {
			return outcome{}, err
		}
		deleted += n
	}
	if deleted == 0 {
		return outcome{}, &skipError{reason: "no active flight to delete"}
	}
	return outcome{note: fmt.Sprintf("%d flights deleted", deleted)}, nil
}
