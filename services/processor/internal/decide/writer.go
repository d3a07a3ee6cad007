package decide

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"msgexchange/libs/telemetry"
	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/internal/outbox"
)

// Outbox targets a flight change writes (services/internal/outbox).
const (
	TargetFlightState = outbox.FlightState
	TargetMsg         = outbox.Msg
	TargetSchd        = outbox.Schd
)

// Writer turns the flight changes of one message into Changes on its
// Sink, reading through its View.
//
// It keeps the derived keys of every document it writes (R-C8, INV-21,
// INV-22): RUNSTATE and a master's MAFL are recomputed on each put, and a
// change to a master's child set (a child created, deleted, moved to
// another MAID, or renamed by FLNO) marks the master dirty; FlushMasters
// rewrites the dirty masters, which bumps their version and emits their
// events only when their MAFL actually changed.
type Writer struct {
	View View
	Sink Sink
	// MsgID and Src name the message; Now is its time of writing.
	MsgID int64
	Src   contract.Source
	Now   time.Time
	// Zone is the operation-day zone of the events' ISO times.
	Zone *time.Location
	// OnFlight, when set, is told every flight the message writes (the
	// execution's trace and log attributes).
	OnFlight func(flid int64)
	// Hold are masters FlushMasters leaves dirty because the message
	// itself writes them later (a snapshot's later batches).
	Hold map[int64]bool

	projections int
	dirty       map[int64]bool
}

// Projections is how many flight changes the message wrote: each leaves a
// pending projection, so a message with any ends APPLIED.
func (w *Writer) Projections() int { return w.projections }

// Load returns the current row of flid, nil when there is none.
func (w *Writer) Load(ctx context.Context, flid int64) (*Flight, error) {
	return w.View.Flight(ctx, flid)
}

// Preload reads flids ahead of their use when the view is a Preloader;
// other views read each flight when it is loaded.
func (w *Writer) Preload(ctx context.Context, flids []int64) error {
	if p, ok := w.View.(Preloader); ok && len(flids) > 0 {
		return p.Preload(ctx, flids)
	}
	return nil
}

// Put writes doc, with its derived keys recomputed, as the ACTIVE state of
// flid when it differs from cur (INV-13: exactly one version bump per
// effective change). opDay is kept once set (INV-12).
func (w *Writer) Put(ctx context.Context, cur *Flight, flid int64, doc flight.Doc, opDay *time.Time) (bool, error) {
	kids, err := w.View.Children(ctx, flid)
	if err != nil {
		return false, err
	}
	if w.Src.Type != "FLOP" && cur.Active() {
		// A daily flight record never carries what FLOPs keep verbatim
		// (FFID, extra elements): keep it, or every snapshot after a FLOP
		// would bump the version for nothing (R-C1, INV-13).
		doc = flight.KeepFLOPVerbatim(cur.Doc, doc)
	}
	doc = flight.Derive(doc, flid, kids)
	delete(w.dirty, flid) // its MAFL is fresh now
	// The stored document is compared value by value, not by its encoding:
	// encoding it too cost as much as a payload (docs/performance.md, R-J1).
	if cur.Active() && sameDoc(cur.Doc, doc) {
		return false, nil
	}
	canonical := doc.Canonical() // encoded once: stored, and embedded in the three payloads
	version := int64(1)
	before := flight.Doc{}
	evType := contract.EventCreated
	if cur == nil {
		// A flight the history sweep archived continues from the version
		// it last published, never from 1 again (R-L1).
		top, err := w.View.Retired(ctx, flid)
		if err != nil {
			return false, err
		}
		version = top + 1
	} else {
		version = cur.Version + 1
		if cur.OpDay != nil {
			opDay = cur.OpDay
		}
		if cur.Active() {
			before = cur.Doc
			evType = contract.EventUpdated
		}
	}
	var master *int64
	if m, ok := doc.MasterFLID(); ok && m != flid {
		master = &m
	}
	w.noteChild(cur, master, doc.String("FLNO"))
	row := Flight{FLID: flid, State: "ACTIVE", Version: version, OpDay: opDay, Master: master, Doc: doc}
	return true, w.emit(ctx, row, canonical, evType, ChangedKeys(before, doc))
}

// noteChild marks the masters whose child set a write changed: the old
// master when the flight left it, the new master when the flight joined it,
// became ACTIVE under it, or changed its FLNO.
func (w *Writer) noteChild(cur *Flight, master *int64, flno string) {
	var old *int64
	oldFLNO := ""
	if cur.Active() {
		old = cur.Master
		oldFLNO = cur.Doc.String("FLNO")
	}
	if old != nil && (master == nil || *old != *master) {
		w.markDirty(*old)
	}
	if master != nil && (old == nil || *old != *master || oldFLNO != flno) {
		w.markDirty(*master)
	}
}

func (w *Writer) markDirty(flid int64) {
	if w.dirty == nil {
		w.dirty = map[int64]bool{}
	}
	w.dirty[flid] = true
}

// FlushMasters rewrites every dirty master that is ACTIVE, so its MAFL
// matches its ACTIVE children (INV-22). A master whose MAFL did not change
// is not written. Masters in Hold stay dirty. Rewriting a master can make
// its own master dirty; the loop runs until nothing is dirty (bounded,
// since code-share chains are short).
func (w *Writer) FlushMasters(ctx context.Context) error {
	for round := 0; round < 16; round++ {
		var ids []int64
		for id := range w.dirty {
			if !w.Hold[id] {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		slices.Sort(ids)
		for _, id := range ids {
			delete(w.dirty, id)
			row, err := w.Load(ctx, id)
			if err != nil {
				return err
			}
			if !row.Active() {
				continue
			}
			if _, err := w.Put(ctx, row, id, row.Doc, row.OpDay); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("refreshing code-share masters: %w", ErrMasterCycle)
}

// Remove marks an ACTIVE flight DELETED with a version bump and emits its
// tombstone and deletion event.
func (w *Writer) Remove(ctx context.Context, cur *Flight) (bool, error) {
	if !cur.Active() {
		return false, nil
	}
	if cur.Master != nil {
		w.markDirty(*cur.Master) // the master loses a child
	}
	row := *cur
	row.State = "DELETED"
	row.Version = cur.Version + 1
	return true, w.emit(ctx, row, nil, contract.EventDeleted, []string{})
}

// emit hands one change with its three outbox rows to the sink.
func (w *Writer) emit(ctx context.Context, row Flight, canonical []byte, evType string, changed []string) error {
	src := w.Src
	parent, state := telemetry.TraceParent(ctx) // the records continue the message's trace (R-I4)
	if w.OnFlight != nil {
		w.OnFlight(row.FLID)
	}
	outbox, err := event{row: row, canonical: canonical, evType: evType, changed: changed, source: &src,
		stateMsgID: w.MsgID, now: w.Now, zone: w.Zone, trace: contract.Trace{Parent: parent, State: state}}.outbox(w.MsgID)
	if err != nil {
		return err
	}
	c := &Change{Row: row, Canonical: canonical, MsgID: w.MsgID, Now: w.Now, Outbox: outbox}
	if err := w.Sink.Change(ctx, c); err != nil {
		return fmt.Errorf("writing flight %d: %w", row.FLID, err)
	}
	w.projections++
	return nil
}

// event is one effective change of a flight as its events encode it.
type event struct {
	row       Flight
	canonical []byte // the stored document's encoding, embedded in the payloads
	evType    string
	changed   []string
	// source is the message that caused the change; nil for a change no
	// message caused (the history sweep's).
	source *contract.Source
	// stateMsgID is the message the flight-state record names; 0 with no
	// source names none (a deletion no message caused carries only its
	// version header).
	stateMsgID int64
	// reason is the event's reason, empty for a message's change.
	reason string
	now    time.Time
	zone   *time.Location
	trace  contract.Trace
}

// outbox encodes the change's three outbox rows — the msgx.flight-state
// record, the msg event and the schd record, in that order — for message
// msgID (0: no message).
func (ev event) outbox(msgID int64) ([]OutboxRow, error) {
	row := ev.row
	day := ""
	if row.OpDay != nil {
		day = row.OpDay.Format(time.DateOnly)
	}
	var doc flight.Doc
	if row.State == "ACTIVE" {
		doc = row.Doc
	}
	key := strconv.FormatInt(row.FLID, 10)
	// The three payloads embed the canonical bytes Put encoded to compare
	// and store the document, not an encoding each (docs/performance.md,
	// R-J1).
	rec, err := flightstate.EncodeCanonical(row.FLID, row.Version, row.State, row.OpDay, ev.stateMsgID, doc, ev.canonical)
	if err != nil {
		return nil, err
	}
	if ev.source == nil && ev.stateMsgID == 0 {
		delete(rec.Headers, flightstate.HeaderMsgID)
	}
	ev.trace.SetHeaders(rec.Headers)
	change := contract.Change{FLID: row.FLID, StateVersion: row.Version, EventType: ev.evType, OperationDay: day,
		Changed: ev.changed, Source: ev.source, Reason: ev.reason, OccurredAt: ev.now, Flight: doc, FlightJSON: ev.canonical,
		Trace: ev.trace}
	msg, st, err := contract.Encoder{Zone: ev.zone}.Records(change)
	if err != nil {
		return nil, err
	}
	return []OutboxRow{
		{Target: TargetFlightState, Pkey: key, Payload: rec.Value, Headers: contract.StringMapJSON(rec.Headers), MsgID: msgID, At: ev.now},
		{Target: TargetMsg, Pkey: key, Payload: msg.Value, Headers: contract.StringMapJSON(msg.Headers), MsgID: msgID, At: ev.now},
		{Target: TargetSchd, Pkey: key, Payload: st.Value, Headers: contract.StringMapJSON(st.Headers), MsgID: msgID, At: ev.now},
	}, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding event: %v", err)) // only plain data is encoded
	}
	return b
}

// ChangedKeys lists the top-level elements that differ between two
// documents, sorted: the Changed field of a flight's event.
func ChangedKeys(before, after flight.Doc) []string {
	out := []string{}
	for k, v := range after {
		if bv, ok := before[k]; !ok || !sameValue(bv, v) {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// sameDoc reports whether two documents have the same canonical JSON
// (their strings are UTF-8: messages are checked on the way in, stored
// documents come out of JSON).
func sameDoc(a, b flight.Doc) bool { return sameValue(map[string]any(a), map[string]any(b)) }

// sameValue reports whether two document values encode to the same JSON:
// strings, objects and lists are compared directly (a per-key encoding of
// both documents cost more than the rest of a FLOP's decision), anything
// else by its encoding.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x == y
		}
	case map[string]any:
		if y, ok := b.(map[string]any); ok && x != nil && y != nil {
			if len(x) != len(y) {
				return false
			}
			for k, xv := range x {
				yv, ok := y[k]
				if !ok || !sameValue(xv, yv) {
					return false
				}
			}
			return true
		}
	case []any:
		if y, ok := b.([]any); ok && x != nil && y != nil {
			if len(x) != len(y) {
				return false
			}
			for i := range x {
				if !sameValue(x[i], y[i]) {
					return false
				}
			}
			return true
		}
	}
	return bytes.Equal(mustJSON(a), mustJSON(b))
}
