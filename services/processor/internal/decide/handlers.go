package decide

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// Handles reports whether Decide handles the message: every kind except
// those with their own transaction rules — daily snapshots (SCHD DNLD and
// RESP, R-C6: Snapshot, ScheduleResponse), season schedules (Season),
// reference RESPs that answer requests (R-D5: ReferenceResponse) — which
// the pipeline runs one at a time.
func Handles(msg *sis.Message, cls sis.Classification) bool {
	styp := msg.Meta.STYP
	switch cls.Kind {
	case sis.KindFlightSnapshot:
		return styp != "DNLD" && styp != "RESP"
	case sis.KindSeasonSchedule:
		return false
	case sis.KindReference:
		return strings.ToUpper(styp) != "RESP"
	}
	return true
}

// Decide routes a classified message that Handles to its handler, then
// refreshes the code-share masters of what it changed (INV-22).
func Decide(ctx context.Context, w *Writer, msg *sis.Message, cls sis.Classification, od flight.OpDay) (Outcome, error) {
	out, err := route(ctx, w, msg, cls, od)
	if err != nil {
		return Outcome{}, err
	}
	if err := w.FlushMasters(ctx); err != nil {
		return Outcome{}, err
	}
	return out, nil
}

func route(ctx context.Context, w *Writer, msg *sis.Message, cls sis.Classification, od flight.OpDay) (Outcome, error) {
	styp := msg.Meta.STYP
	switch cls.Kind {
	case sis.KindFlightSnapshot:
		switch styp {
		case "DEL":
			return SnapshotDelete(ctx, w, msg)
		case "DNLD", "RESP":
			return Outcome{}, fmt.Errorf("SCHD %s has its own batch rules and is not decided here", styp)
		default: // ADFT (R-C9), ADD, UPD
			return SnapshotUpsert(ctx, w, msg, od)
		}
	case sis.KindFlightOperation:
		if styp == "FDEL" {
			return FDEL(ctx, w, msg)
		}
		return FLOP(ctx, w, msg, styp)
	case sis.KindReference:
		return Reference(ctx, w, msg)
	}
	return Outcome{}, &Unsupported{Reason: fmt.Sprintf("no handler for %s/%s (%s)", msg.Meta.TYPE, styp, cls.Kind)}
}

// FLIDs lists the flights a message names directly (FLOP records, SCHD
// FLTR records), so that a batch can load them and their code-share
// children in one query. It never fails: what it cannot read, the handler
// rejects later.
func FLIDs(msg *sis.Message) []int64 {
	var out []int64
	add := func(v string) {
		if id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && id > 0 {
			out = append(out, id)
		}
	}
	for _, rec := range msg.Root.ChildrenNamed("FLOP") {
		add(rec.Child("FLID").Value())
	}
	if schd := msg.Root.Child("SCHD"); schd != nil {
		for _, f := range schd.ChildrenNamed("FLTR") {
			add(f.Child("FLID").Value())
			add(f.Child("MAID").Value())
		}
	}
	return out
}

// FLOP applies every FLOP record of a flight-operation message. A record for
// a flight that does not exist or is deleted changes nothing (R-C4): if no
// record applies, the message is SKIPPED with the reason. The derived keys
// (RUNSTATE, MAFL) are recomputed by the writer, so a status subtype (BOTM,
// LACL, CNCL, FDIV, FRET, FLAB) moves the running state in the same
// version.
func FLOP(ctx context.Context, w *Writer, msg *sis.Message, styp string) (Outcome, error) {
	var missing []string
	applied, unchanged := 0, 0
	for _, rec := range msg.Root.ChildrenNamed("FLOP") {
		flid, err := flopFLID(rec)
		if err != nil {
			return Outcome{}, err
		}
		cur, err := w.Load(ctx, flid)
		if err != nil {
			return Outcome{}, err
		}
		if !cur.Active() {
			missing = append(missing, NotFound(flid, cur))
			continue
		}
		next, err := flight.ApplyFLOP(cur.Doc, styp, rec)
		if err != nil {
			return Outcome{}, err
		}
		ok, err := w.Put(ctx, cur, flid, next, cur.OpDay)
		if err != nil {
			return Outcome{}, err
		}
		if ok {
			applied++
		} else {
			unchanged++
		}
	}
	if applied == 0 && unchanged == 0 {
		return Outcome{}, &Skip{Reason: strings.Join(missing, "; ")}
	}
	note := fmt.Sprintf("%d changed, %d unchanged", applied, unchanged)
	if len(missing) > 0 {
		note += "; " + strings.Join(missing, "; ")
	}
	return Outcome{Note: note}, nil
}

func flopFLID(rec *sis.Node) (int64, error) {
	v := rec.Child("FLID").Value()
	flid, err := strconv.ParseInt(v, 10, 64)
	if err != nil || flid <= 0 {
		return 0, &flight.RejectError{Reason: fmt.Sprintf("FLOP: FLID %q is not a positive integer", v)}
	}
	return flid, nil
}

// NotFound is the reason part for a record whose flight is missing or
// deleted.
func NotFound(flid int64, cur *Flight) string {
	if cur == nil {
		return fmt.Sprintf("flight %d not found", flid)
	}
	return fmt.Sprintf("flight %d is deleted", flid)
}

// FDEL deletes the flights of an FDEL message, each with its code-share
// children (R-C5, C-25). No EROR is sent back.
func FDEL(ctx context.Context, w *Writer, msg *sis.Message) (Outcome, error) {
	var missing []string
	deleted := 0
	for _, rec := range msg.Root.ChildrenNamed("FLOP") {
		if err := flight.CheckFDEL(rec); err != nil {
			return Outcome{}, err
		}
		flid, err := flopFLID(rec)
		if err != nil {
			return Outcome{}, err
		}
		cur, err := w.Load(ctx, flid)
		if err != nil {
			return Outcome{}, err
		}
		if !cur.Active() {
			missing = append(missing, NotFound(flid, cur))
			continue
		}
		n, err := DeleteWithChildren(ctx, w, flid, func(int64) bool { return true })
		if err != nil {
			return Outcome{}, err
		}
		// The master flid was a child of gets its MAFL refreshed (INV-22).
		if err := w.FlushMasters(ctx); err != nil {
			return Outcome{}, err
		}
		deleted += n
	}
	if deleted == 0 {
		return Outcome{}, &Skip{Reason: strings.Join(missing, "; ")}
	}
	return Outcome{Note: fmt.Sprintf("%d flights deleted", deleted)}, nil
}

// DeleteWithChildren deletes flid and those of its ACTIVE code-share
// children that include accepts. It returns how many flights it deleted;
// the masters it made dirty are left for the caller's FlushMasters.
func DeleteWithChildren(ctx context.Context, w *Writer, flid int64, include func(int64) bool) (int, error) {
	cur, err := w.Load(ctx, flid)
	if err != nil {
		return 0, err
	}
	if !cur.Active() {
		return 0, nil
	}
	kids, err := w.View.Children(ctx, flid)
	if err != nil {
		return 0, err
	}
	var children []int64
	for _, c := range kids {
		if include(c.FLID) {
			children = append(children, c.FLID)
		}
	}
	n := 0
	for _, c := range append(children, flid) {
		row, err := w.Load(ctx, c)
		if err != nil {
			return 0, err
		}
		ok, err := w.Remove(ctx, row)
		if err != nil {
			return 0, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// CheckRECS refuses an SCHD package whose RECS, when present and not
// empty, differs from the number of FLTR records it carries, fltrs (R-C6,
// INV-19).
func CheckRECS(schd *sis.Node, fltrs int) error {
	if recs := schd.Child("RECS"); recs != nil && recs.Value() != "" {
		n, err := strconv.Atoi(recs.Value())
		if err != nil || n != fltrs {
			return &flight.RejectError{Reason: fmt.Sprintf("SCHD declares RECS %q but carries %d FLTR records", recs.Value(), fltrs)}
		}
	}
	return nil
}

// SnapshotRecords validates a whole SCHD package before anything is
// written (R-C6, INV-19): every FLTR valid, RECS matching the records, no
// FLID twice. It returns the records and their operation days; msg is
// only read.
func SnapshotRecords(msg *sis.Message, od flight.OpDay) ([]flight.Record, []time.Time, error) {
	schd := msg.Root.Child("SCHD")
	fltrs := schd.ChildrenNamed("FLTR")
	return readRecords(schd, len(fltrs), od, func(fn func(*sis.Node) error) error {
		for _, f := range fltrs {
			if err := fn(f); err != nil {
				return err
			}
		}
		return nil
	})
}

// takeSnapshotRecords is SnapshotRecords taking the FLTR records out of
// msg as it reads them (sis.Node.TakeEach): a decoded record is
// collectable once it is converted, so a large package's tree and its
// records never live whole side by side (R-J4: at 20,000 flights the
// executor's peak heap fell from 74–82 MB to 56 MB). msg keeps its
// envelope and the SCHD's other elements (RECS, STDB, STDE), and has no
// FLTR afterwards, whatever the outcome.
func takeSnapshotRecords(msg *sis.Message, od flight.OpDay) ([]flight.Record, []time.Time, error) {
	schd := msg.Root.Child("SCHD")
	return readRecords(schd, schd.Count("FLTR"), od, func(fn func(*sis.Node) error) error {
		return schd.TakeEach("FLTR", fn)
	})
}

// readRecords is SnapshotRecords over the n FLTR records each yields.
func readRecords(schd *sis.Node, n int, od flight.OpDay, each func(func(*sis.Node) error) error) ([]flight.Record, []time.Time, error) {
	if err := CheckRECS(schd, n); err != nil {
		return nil, nil, err
	}
	out := make([]flight.Record, 0, n)
	days := make([]time.Time, 0, n)
	seen := make(map[int64]bool, n)
	err := each(func(f *sis.Node) error {
		r, err := flight.FromFLTR(f, od)
		if err != nil {
			return err
		}
		if seen[r.FLID] {
			return &flight.RejectError{Reason: fmt.Sprintf("SCHD carries FLID %d twice", r.FLID)}
		}
		seen[r.FLID] = true
		day, _ := od.Of(r.Doc.String("SODT")) // validated by FromFLTR
		out = append(out, r)
		days = append(days, day)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, days, nil
}

// OperationDayMoved is the rejection of a package that would move a
// stored flight to another operation day (INV-12, INV-19).
func OperationDayMoved(flid int64, stored, want time.Time) error {
	return &flight.RejectError{Reason: fmt.Sprintf("flight %d would move from operation day %s to %s",
		flid, stored.Format(time.DateOnly), want.Format(time.DateOnly))}
}

// checkOperationDays refuses a package that would move a stored flight to
// another operation day, reporting the smallest such FLID.
func checkOperationDays(ctx context.Context, w *Writer, recs []flight.Record, days []time.Time) error {
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(recs[a].FLID - recs[b].FLID) })
	for _, i := range idx {
		cur, err := w.Load(ctx, recs[i].FLID)
		if err != nil {
			return err
		}
		if cur != nil && cur.OpDay != nil && !cur.OpDay.Equal(days[i]) {
			return OperationDayMoved(cur.FLID, *cur.OpDay, days[i])
		}
	}
	return nil
}

// WriteOrder is the order a snapshot writes its records in: code-share
// children (a MAID other than themselves) first, then the others, each
// group in input order. A master written after its children computes its
// MAFL once, with them (INV-21), instead of a second version per child.
func WriteOrder(recs []flight.Record) []int {
	order := make([]int, 0, len(recs))
	for pass := 0; pass < 2; pass++ {
		for i, r := range recs {
			m, ok := r.Doc.MasterFLID()
			isChild := ok && m != r.FLID
			if isChild == (pass == 0) {
				order = append(order, i)
			}
		}
	}
	return order
}

// SnapshotUpsert applies SCHD ADFT (ad-hoc flight, R-C9, INV-14b) and SCHD
// ADD and UPD (catalogue §3: upsert without deleting). The package is
// validated as a whole first, like a snapshot (RECS, required elements,
// FLID unique, no flight changing operation day; DEAD(PROTOCOL) with
// nothing written otherwise), then every record is written, code-share
// children before masters; no other flight is deleted. ADD and UPD write a
// record exactly as a snapshot does: the record is the AODB's complete
// word for its flight and replaces the flight's document, optional
// elements it does not carry included (C-26), and a deleted flight comes
// back; ADD of a stored flight and UPD of an unknown one are both upserts.
// ADFT instead creates its flight like a snapshot record or merges into
// the existing one (elements it carries replace the stored ones, elements
// it does not carry are kept; see flight.Merge).
func SnapshotUpsert(ctx context.Context, w *Writer, msg *sis.Message, od flight.OpDay) (Outcome, error) {
	recs, days, err := SnapshotRecords(msg, od)
	if err != nil {
		return Outcome{}, err
	}
	if err := checkOperationDays(ctx, w, recs, days); err != nil {
		return Outcome{}, err
	}
	merge := msg.Meta.STYP == "ADFT"
	changed := 0
	for _, i := range WriteOrder(recs) {
		r := recs[i]
		cur, err := w.Load(ctx, r.FLID)
		if err != nil {
			return Outcome{}, err
		}
		doc := r.Doc
		if merge && cur.Active() {
			doc = flight.Merge(cur.Doc, r)
		}
		ok, err := w.Put(ctx, cur, r.FLID, doc, &days[i])
		if err != nil {
			return Outcome{}, err
		}
		if ok {
			changed++
		}
	}
	if err := w.FlushMasters(ctx); err != nil {
		return Outcome{}, err
	}
	return Outcome{Note: fmt.Sprintf("%s: %d records, %d changed", msg.Meta.STYP, len(recs), changed)}, nil
}

// SnapshotDelete applies SCHD DEL (catalogue §3: delete by FLID). The
// package is validated first: RECS matching the records, every record
// with a positive integer FLID (its other elements are ignored), no FLID
// twice; a violation is DEAD(PROTOCOL) with nothing written. Each named
// ACTIVE flight is then deleted like an FDEL deletes it (R-C5, C-25): state
// DELETED with a version bump, tombstones and FLIGHT_DELETED, with its
// ACTIVE code-share children, its master's MAFL rewritten (INV-22). A FLID
// that names no ACTIVE flight changes nothing and is listed in the reason;
// when no record deleted anything the message is SKIPPED with that reason,
// as an FDEL is (R-C4).
func SnapshotDelete(ctx context.Context, w *Writer, msg *sis.Message) (Outcome, error) {
	schd := msg.Root.Child("SCHD")
	fltrs := schd.ChildrenNamed("FLTR")
	if err := CheckRECS(schd, len(fltrs)); err != nil {
		return Outcome{}, err
	}
	flids := make([]int64, 0, len(fltrs))
	seen := make(map[int64]bool, len(fltrs))
	for _, f := range fltrs {
		flid, err := flight.DeleteFLID(f)
		if err != nil {
			return Outcome{}, err
		}
		if seen[flid] {
			return Outcome{}, &flight.RejectError{Reason: fmt.Sprintf("SCHD carries FLID %d twice", flid)}
		}
		seen[flid] = true
		flids = append(flids, flid)
	}
	// What was not ACTIVE before the message is listed; a child the
	// message also names and its master's deletion took along is not.
	var missing []string
	active := flids[:0:0]
	for _, flid := range flids {
		cur, err := w.Load(ctx, flid)
		if err != nil {
			return Outcome{}, err
		}
		if !cur.Active() {
			missing = append(missing, NotFound(flid, cur))
			continue
		}
		active = append(active, flid)
	}
	deleted := 0
	for _, flid := range active {
		n, err := DeleteWithChildren(ctx, w, flid, func(int64) bool { return true })
		if err != nil {
			return Outcome{}, err
		}
		deleted += n
	}
	if err := w.FlushMasters(ctx); err != nil {
		return Outcome{}, err
	}
	if deleted == 0 {
		reason := "SCHD DEL deleted nothing"
		if len(missing) > 0 {
			reason += ": " + strings.Join(missing, "; ")
		}
		return Outcome{}, &Skip{Reason: reason}
	}
	note := fmt.Sprintf("DEL: %d records, %d flights deleted", len(flids), deleted)
	if len(missing) > 0 {
		note += "; " + strings.Join(missing, "; ")
	}
	return Outcome{Note: note}, nil
}
