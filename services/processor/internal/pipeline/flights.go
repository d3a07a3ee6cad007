package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/flight"
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
type writer struct {
	tx          pgx.Tx
	msgID       int64
	src         Source
	now         time.Time
	projections int
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
	if err := jsonUnmarshal(doc, &r.Doc); err != nil {
		return nil, fmt.Errorf("reading flight %d document: %w", flid, err)
	}
	return &r, nil
}

// put writes doc as the ACTIVE state of flid when it differs from cur
// (INV-13: exactly one version bump per effective change). opDay is kept
// once set (INV-12).
func (w *writer) put(ctx context.Context, cur *flightRow, flid int64, doc flight.Doc, opDay *time.Time) (bool, error) {
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
	_, err := w.tx.Exec(ctx, `
		INSERT INTO flight (flid, operation_day, state, state_version, master_flid, last_msg_id, doc, created_at, updated_at)
		VALUES ($1, $2, 'ACTIVE', $3, $4, $5, $6, $7, $7)
		ON CONFLICT (flid) DO UPDATE SET operation_day=EXCLUDED.operation_day, state='ACTIVE',
			state_version=EXCLUDED.state_version, master_flid=EXCLUDED.master_flid,
			last_msg_id=EXCLUDED.last_msg_id, doc=EXCLUDED.doc, updated_at=EXCLUDED.updated_at`,
		flid, opDay, version, master, w.msgID, doc.Canonical(), w.now)
	if err != nil {
		return false, fmt.Errorf("writing flight %d: %w", flid, err)
	}
	return true, w.emit(ctx, flid, version, "ACTIVE", opDay, doc, evType, changedKeys(before, doc))
}

// remove marks an ACTIVE flight DELETED with a version bump and emits its
// tombstone and deletion event.
func (w *writer) remove(ctx context.Context, cur *flightRow) (bool, error) {
	if cur == nil || cur.State != "ACTIVE" {
		return false, nil
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
	var statePayload []byte
	headers := map[string]string{"msgx-version": strconv.FormatInt(version, 10), "msgx-msg-id": strconv.FormatInt(w.msgID, 10)}
	if state == "ACTIVE" {
		statePayload = mustJSON(FlightState{Schema: 1, FLID: flid, Version: version, State: state, OperationDay: day, MsgID: w.msgID, Doc: doc})
	}
	ev := mustJSON(Event{
		SchemaVersion: 1, EventID: eventID(flid, version), EventType: evType, FLID: flid, StateVersion: version,
		OperationDay: day, Changed: changed, Source: w.src, OccurredAt: w.now.UTC(), Flight: doc,
	})
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		TargetFlightState, key, statePayload, mustJSON(headers), w.msgID, w.now)
	b.Queue(`INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		TargetMsg, key, ev, mustJSON(map[string]string{"msgx-event-id": eventID(flid, version)}), w.msgID, w.now)
	b.Queue(`INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		TargetSchd, key, statePayload, mustJSON(headers), w.msgID, w.now)
	b.Queue(`INSERT INTO projection_pending (msg_id, flid, version) VALUES ($1, $2, $3)
	         ON CONFLICT (msg_id, flid) DO UPDATE SET version = GREATEST(projection_pending.version, EXCLUDED.version)`,
		w.msgID, flid, version)
	if err := w.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("writing events of flight %d: %w", flid, err)
	}
	w.projections++
	return nil
}
