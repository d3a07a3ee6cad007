package decide

import (
	"context"
	"fmt"
	"time"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
)

// HistorySweepReason is the reason of the events the history sweep causes:
// the deletion of a flight it purged while still ACTIVE, and the rewrite of
// a code-share master that lost that flight from its MAFL.
const HistorySweepReason = "history-sweep"

// SweepView is what the history sweep reads in the transaction of one
// flight. Rows are locked without waiting (SKIP LOCKED): a row a
// processing transaction holds is reported as held, and the flight waits
// for the next run (INV-18).
type SweepView interface {
	// Due locks flid when its operation day is before cutoff and returns
	// it without its document (the sweep archives the stored row as it
	// is); nil when it is gone or no longer due; held when a processing
	// transaction holds it.
	Due(ctx context.Context, flid int64, cutoff time.Time) (f *Flight, held bool, err error)
	// Master locks flid with its document and last message; nil when it is
	// gone; held when a processing transaction holds it.
	Master(ctx context.Context, flid int64) (f *Flight, held bool, err error)
	// Children returns the ACTIVE code-share children of flid, as View's.
	Children(ctx context.Context, flid int64) ([]flight.Child, error)
}

// SweepSink receives the history sweep's writes for one flight. The
// changes it is given were caused by no message: their outbox rows have
// MsgID 0 and they leave no pending projection.
type SweepSink interface {
	// Archive copies the stored row of flid to the history, writes the
	// outbox rows of tomb (its one deletion, nil for a flight already
	// DELETED) and only then removes the live row (INV-28).
	Archive(ctx context.Context, flid int64, tomb *Change, now time.Time) error
	// Change writes a code-share master's rewrite: its version and
	// document (its last message stays), and its outbox rows.
	Change(ctx context.Context, c *Change) error
}

// Swept is what the history sweep did to one flight.
type Swept int

// What the history sweep did to one flight.
const (
	// SweptGone: deleted or no longer due meanwhile; nothing written.
	SweptGone Swept = iota
	// SweptArchived: archived and removed; it was DELETED already.
	SweptArchived
	// SweptTombstoned: archived and removed, and its deletion emitted.
	SweptTombstoned
	// SweptHeld: the flight or its code-share master is held by a
	// processing transaction; nothing written, the next run takes it.
	SweptHeld
)

// Sweep archives one flight due for history (R-C11, INV-28): its row goes
// to the history and leaves the live table; a still ACTIVE flight, purged
// without FDEL, gives its consumers exactly one deletion (version + 1,
// reason history-sweep). A still ACTIVE code-share child leaves its
// master's MAFL: the master, when it is ACTIVE, is rewritten in the same
// transaction (R-C8, INV-21, INV-22); a held master defers the child to the
// next run like a held child. zone reads the SIS times of the master's
// events.
func Sweep(ctx context.Context, v SweepView, s SweepSink, flid int64, cutoff, now time.Time, zone *time.Location) (Swept, error) {
	cur, held, err := v.Due(ctx, flid, cutoff)
	switch {
	case err != nil:
		return SweptGone, err
	case held:
		return SweptHeld, nil
	case cur == nil:
		return SweptGone, nil
	}
	var master *Flight
	if cur.Active() && cur.Master != nil && *cur.Master != flid {
		m, held, err := v.Master(ctx, *cur.Master)
		if err != nil {
			return SweptGone, err
		}
		if held {
			return SweptHeld, nil
		}
		if m.Active() { // a master gone or DELETED has no MAFL to keep
			master = m
		}
	}
	var tomb *Change
	if cur.Active() {
		row := *cur
		row.State = "DELETED"
		row.Version = cur.Version + 1
		outbox, err := event{row: row, evType: contract.EventDeleted, changed: []string{},
			reason: HistorySweepReason, now: now, zone: zone}.outbox(0)
		if err != nil {
			return SweptGone, err
		}
		tomb = &Change{Row: row, Now: now, Outbox: outbox}
	}
	if err := s.Archive(ctx, flid, tomb, now); err != nil {
		return SweptGone, err
	}
	if master != nil {
		if err := refreshMaster(ctx, v, s, master, now, zone); err != nil {
			return SweptGone, err
		}
	}
	if tomb != nil {
		return SweptTombstoned, nil
	}
	return SweptArchived, nil
}

// refreshMaster rewrites m's MAFL from its ACTIVE children once the swept
// child's row is gone: when it changed, the master gets the next version
// and its events (the flight-state record, FLIGHT_UPDATED with reason
// history-sweep and the schd record) with no message — no source, and the
// flight-state record names the master's last message, as a projection
// rebuild does.
func refreshMaster(ctx context.Context, v SweepView, s SweepSink, m *Flight, now time.Time, zone *time.Location) error {
	kids, err := v.Children(ctx, m.FLID)
	if err != nil {
		return err
	}
	doc := flight.Derive(m.Doc, m.FLID, kids)
	if flight.Equal(m.Doc, doc) {
		return nil
	}
	row := *m
	row.Version = m.Version + 1
	row.Doc = doc
	canonical := doc.Canonical() // stored, and reused in the three payloads
	outbox, err := event{row: row, canonical: canonical, evType: contract.EventUpdated, changed: ChangedKeys(m.Doc, doc),
		stateMsgID: m.LastMsgID, reason: HistorySweepReason, now: now, zone: zone}.outbox(0)
	if err != nil {
		return err
	}
	if err := s.Change(ctx, &Change{Row: row, Canonical: canonical, Now: now, Outbox: outbox}); err != nil {
		return fmt.Errorf("rewriting code-share master %d: %w", m.FLID, err)
	}
	return nil
}
