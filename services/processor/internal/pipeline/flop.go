package pipeline

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// flop applies every FLOP record of a flight-operation message. A record for
// a flight that does not exist or is deleted changes nothing (R-C4): if no
// record applies, the message is SKIPPED with the reason. The derived keys
// (RUNSTATE, MAFL) are recomputed by the writer, so a status subtype (BOTM,
// LACL, CNCL, FDIV, FRET, FLAB) moves the running state in the same
// version.
func (e *Engine) flop(ctx context.Context, w *writer, msg *sis.Message, styp string) (outcome, error) {
	var missing []string
	applied, unchanged := 0, 0
	for _, rec := range msg.Root.ChildrenNamed("FLOP") {
		flid, err := flopFLID(rec)
		if err != nil {
			return outcome{}, err
		}
		cur, err := w.load(ctx, flid)
		if err != nil {
			return outcome{}, err
		}
		if cur == nil || cur.State != "ACTIVE" {
			missing = append(missing, notFound(flid, cur))
			continue
		}
		next, err := flight.ApplyFLOP(cur.Doc, styp, rec)
		if err != nil {
			return outcome{}, err
		}
		ok, err := w.put(ctx, cur, flid, next, cur.OpDay)
		if err != nil {
			return outcome{}, err
		}
		if ok {
			applied++
		} else {
			unchanged++
		}
	}
	if applied == 0 && unchanged == 0 {
		return outcome{}, &skipError{reason: strings.Join(missing, "; ")}
	}
	note := fmt.Sprintf("%d changed, %d unchanged", applied, unchanged)
	if len(missing) > 0 {
		note += "; " + strings.Join(missing, "; ")
	}
	return outcome{note: note}, nil
}

func flopFLID(rec *sis.Node) (int64, error) {
	v := rec.Child("FLID").Value()
	flid, err := strconv.ParseInt(v, 10, 64)
	if err != nil || flid <= 0 {
		return 0, &flight.RejectError{Reason: fmt.Sprintf("FLOP: FLID %q is not a positive integer", v)}
	}
	return flid, nil
}

func notFound(flid int64, cur *flightRow) string {
	if cur == nil {
		return fmt.Sprintf("flight %d not found", flid)
	}
	return fmt.Sprintf("flight %d is deleted", flid)
}

// fdel deletes the flights of an FDEL message, each with its code-share
// children in the same transaction (R-C5, C-25). No EROR is sent back.
func (e *Engine) fdel(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	var missing []string
	deleted := 0
	for _, rec := range msg.Root.ChildrenNamed("FLOP") {
		if err := flight.CheckFDEL(rec); err != nil {
			return outcome{}, err
		}
		flid, err := flopFLID(rec)
		if err != nil {
			return outcome{}, err
		}
		cur, err := w.load(ctx, flid)
		if err != nil {
			return outcome{}, err
		}
		if cur == nil || cur.State != "ACTIVE" {
			missing = append(missing, notFound(flid, cur))
			continue
		}
		n, err := e.deleteCascade(ctx, w, flid)
		if err != nil {
			return outcome{}, err
		}
		deleted += n
	}
	if deleted == 0 {
		return outcome{}, &skipError{reason: strings.Join(missing, "; ")}
	}
	return outcome{note: fmt.Sprintf("%d flights deleted", deleted)}, nil
}

// deleteCascade deletes flid and its ACTIVE code-share children (C-25),
// and refreshes the MAFL of the master flid was a child of (INV-22).
func (e *Engine) deleteCascade(ctx context.Context, w *writer, flid int64) (int, error) {
	n, err := e.deleteWithChildren(ctx, w, flid, func(int64) bool { return true })
	if err != nil {
		return 0, err
	}
	return n, w.flushMasters(ctx)
}

// deleteWithChildren deletes flid and those of its ACTIVE code-share
// children that include accepts, in the writer's transaction. It returns
// how many flights it deleted; the masters it made dirty are left for the
// caller's flushMasters.
func (e *Engine) deleteWithChildren(ctx context.Context, w *writer, flid int64, include func(int64) bool) (int, error) {
	cur, err := w.load(ctx, flid)
	if err != nil {
		return 0, err
	}
	if cur == nil || cur.State != "ACTIVE" {
		return 0, nil
	}
	n := 0
	rows, err := w.tx.Query(ctx, `SELECT flid FROM flight WHERE master_flid=$1 AND state='ACTIVE' ORDER BY flid`, flid)
	if err != nil {
		return 0, fmt.Errorf("listing code-share children of %d: %w", flid, err)
	}
	var children []int64
	for rows.Next() {
		var c int64
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return 0, fmt.Errorf("reading child flight: %w", err)
		}
		if include(c) {
			children = append(children, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("listing code-share children of %d: %w", flid, err)
	}
	for _, c := range append(children, flid) {
		row, err := w.load(ctx, c)
		if err != nil {
			return 0, err
		}
		ok, err := w.remove(ctx, row)
		if err != nil {
			return 0, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}
