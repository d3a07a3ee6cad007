package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
)

// flightRow is a row of the flight table.
type flightRow struct {
	FLID    int64
	State   string
	Version int64
	OpDay   *time.Time
	Master  *int64
	Doc     flight.Doc
}

// writer writes flight changes of one message inside its transaction, with
// their outbox rows and pending projections, so they commit together.
//
// It also keeps the derived keys of every document it writes (R-C8,
// INV-21, INV-22): RUNSTATE and a master's MAFL are recomputed on each put,
// and a change to a master's child set (a child created, deleted, moved to
// another MAID, or renamed by FLNO) marks the master dirty; flushMasters
// rewrites the dirty masters in the same transaction, which bumps their
// version and emits their events only when their MAFL actually changed.
type writer struct {
	tx          pgx.Tx
	msgID       int64
	src         Source
	now         time.Time
	zone        *time.Location // operation-day zone of the events' ISO times
	projections int
	// dirty are masters whose MAFL may be stale.
	dirty map[int64]bool
	// hold are masters flushMasters leaves dirty because the message
	// itself writes them later (a snapshot's later batches).
	hold map[int64]bool
}

func (w *writer) load(ctx context.Context, flid int64) (*flightRow, error) {
	var r flightRow
	var doc []byte
	err := w.tx.QueryRow(ctx, `SELECT flid, state, state_version, operation_day, master_flid, doc FROM flight WHERE flid=$1 FOR UPDATE`, flid).
		Scan(&r.FLID, &r.State, &r.Version, &r.OpDay, &r.Master, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading flight %d: %w", flid, err)
	}
	if err := json.Unmarshal(doc, &r.Doc); err != nil {
		return nil, fmt.Errorf("reading flight %d document: %w", flid, err)
	}
	return &r, nil
}

// children returns the ACTIVE code-share children of flid (MAID = flid):
// the content of its MAFL.
func (w *writer) children(ctx context.Context, flid int64) ([]flight.Child, error) {
	rows, err := w.tx.Query(ctx, `SELECT flid, COALESCE(doc->>'FLNO', '') FROM flight
		WHERE master_flid=$1 AND state='ACTIVE' AND flid<>$1 ORDER BY flid`, flid)
	if err != nil {
		return nil, fmt.Errorf("listing code-share children of %d: %w", flid, err)
	}
	kids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (flight.Child, error) {
		var c flight.Child
		err := r.Scan(&c.FLID, &c.FLNO)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing code-share children of %d: %w", flid, err)
	}
	return kids, nil
}

// put writes doc, with its derived keys recomputed, as the ACTIVE state of
// flid when it differs from cur (INV-13: exactly one version bump per
// effective change). opDay is kept once set (INV-12).
func (w *writer) put(ctx context.Context, cur *flightRow, flid int64, doc flight.Doc, opDay *time.Time) (bool, error) {
	kids, err := w.children(ctx, flid)
	if err != nil {
		return false, err
	}
	if w.src.Type != "FLOP" && cur != nil && cur.State == "ACTIVE" {
		// A daily flight record never carries what FLOPs keep verbatim
		// (FFID, extra elements): keep it, or every snapshot after a FLOP
		// would bump the version for nothing (R-C1, INV-13).
		doc = flight.KeepFLOPVerbatim(cur.Doc, doc)
	}
	doc = flight.Derive(doc, flid, kids)
	delete(w.dirty, flid) // its MAFL is fresh now
	if cur != nil && cur.State == "ACTIVE" && flight.Equal(cur.Doc, doc) {
		return false, nil
	}
	version := int64(1)
	before := flight.Doc{}
	evType := EventCreated
	if cur != nil {
		version = cur.Version + 1
		if cur.OpDay != nil {
			opDay = cur.OpDay
		}
		if cur.State == "ACTIVE" {
			before = cur.Doc
			evType = EventUpdated
		}
	}
	var master *int64
	if m, ok := doc.MasterFLID(); ok && m != flid {
		master = &m
	}
	_, err = w.tx.Exec(ctx, `
		INSERT INTO flight (flid, operation_day, state, state_version, master_flid, last_msg_id, doc, created_at, updated_at)
		VALUES ($1, $2, 'ACTIVE', $3, $4, $5, $6, $7, $7)
		ON CONFLICT (flid) DO UPDATE SET operation_day=EXCLUDED.operation_day, state='ACTIVE',
			state_version=EXCLUDED.state_version, master_flid=EXCLUDED.master_flid,
			last_msg_id=EXCLUDED.last_msg_id, doc=EXCLUDED.doc, updated_at=EXCLUDED.updated_at`,
		flid, opDay, version, master, w.msgID, doc.Canonical(), w.now)
	if err != nil {
		return false, fmt.Errorf("writing flight %d: %w", flid, err)
	}
	w.noteChild(cur, master, doc.String("FLNO"))
	return true, w.emit(ctx, flid, version, "ACTIVE", opDay, doc, evType, changedKeys(before, doc))
}

// noteChild marks the masters whose child set a write changed: the old
// master when the flight left it, the new master when the flight joined it,
// became ACTIVE under it, or changed its FLNO.
func (w *writer) noteChild(cur *flightRow, master *int64, flno string) {
	var old *int64
	oldFLNO := ""
	if cur != nil && cur.State == "ACTIVE" {
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

func (w *writer) markDirty(flid int64) {
	if w.dirty == nil {
		w.dirty = map[int64]bool{}
	}
	w.dirty[flid] = true
}

// flushMasters rewrites every dirty master that is ACTIVE, so its MAFL
// matches its ACTIVE children, in the writer's transaction (INV-22). A
// master whose MAFL did not change is not written. Masters in hold stay
// dirty. Rewriting a master can make its own master dirty; the loop runs
// until nothing is dirty (bounded, since code-share chains are short).
func (w *writer) flushMasters(ctx context.Context) error {
	for round := 0; round < 16; round++ {
		var ids []int64
		for id := range w.dirty {
			if !w.hold[id] {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		slices.Sort(ids)
		for _, id := range ids {
			delete(w.dirty, id)
			row, err := w.load(ctx, id)
			if err != nil {
				return err
			}
			if row == nil || row.State != "ACTIVE" {
				continue
			}
			if _, err := w.put(ctx, row, id, row.Doc, row.OpDay); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("refreshing code-share masters: %w", ErrMasterCycle)
}

// remove marks an ACTIVE flight DELETED with a version bump and emits its
// tombstone and deletion event.
func (w *writer) remove(ctx context.Context, cur *flightRow) (bool, error) {
	if cur == nil || cur.State != "ACTIVE" {
		return false, nil
	}
	if cur.Master != nil {
		w.markDirty(*cur.Master) // the master loses a child
	}
	version := cur.Version + 1
	_, err := w.tx.Exec(ctx, `UPDATE flight SET state='DELETED', state_version=$2, last_msg_id=$3, updated_at=$4 WHERE flid=$1`,
		cur.FLID, version, w.msgID, w.now)
	if err != nil {
		return false, fmt.Errorf("deleting flight %d: %w", cur.FLID, err)
	}
	return true, w.emit(ctx, cur.FLID, version, "DELETED", cur.OpDay, nil, EventDeleted, []string{})
}

func (w *writer) emit(ctx context.Context, flid, version int64, state string, opDay *time.Time, doc flight.Doc, evType string, changed []string) error {
	day := ""
	if opDay != nil {
		day = opDay.Format(time.DateOnly)
	}
	key := strconv.FormatInt(flid, 10)
	rec, err := flightstate.Encode(flid, version, state, opDay, w.msgID, doc)
	if err != nil {
		return err
	}
	statePayload, headers := rec.Value, rec.Headers
	src := w.src
	tr := traceOf(ctx) // the execution's span: the records of this change continue the message's trace (R-I4)
	tr.SetHeaders(headers)
	noteFlight(ctx, flid)
	change := contract.Change{FLID: flid, StateVersion: version, EventType: evType, OperationDay: day,
		Changed: changed, Source: &src, OccurredAt: w.now, Flight: doc, Trace: tr}
	enc := contract.Encoder{Zone: w.zone}
	ev, err := enc.Msg(change)
	if err != nil {
		return err
	}
	st, err := enc.Schd(change)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		TargetFlightState, key, statePayload, mustJSON(headers), w.msgID, w.now)
	b.Queue(`INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		TargetMsg, key, ev.Value, mustJSON(ev.Headers), w.msgID, w.now)
	b.Queue(`INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		TargetSchd, key, st.Value, mustJSON(st.Headers), w.msgID, w.now)
	b.Queue(`INSERT INTO projection_pending (msg_id, flid, version) VALUES ($1, $2, $3)
	         ON CONFLICT (msg_id, flid) DO UPDATE SET version = GREATEST(projection_pending.version, EXCLUDED.version)`,
		w.msgID, flid, version)
	if err := w.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("writing events of flight %d: %w", flid, err)
	}
	w.projections++
	return nil
}
