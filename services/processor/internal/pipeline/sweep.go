package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/processor/internal/decide"
)

const (
	// DefaultHistoryRetention keeps a flight live for 3 days after its
	// operation day (R-C11).
	DefaultHistoryRetention = 3 * 24 * time.Hour

	// sweepPage is how many candidate FLIDs the history sweep reads at once.
	sweepPage = 500
	// historySweepReason is the reason of the deletion event of a flight the
	// sweep purged while it was still ACTIVE.
	historySweepReason = "history-sweep"
)

// HistoryResult is what one history sweep did (R-C11).
type HistoryResult struct {
	// Cutoff is the first operation day that stays live: flights of earlier
	// days were due.
	Cutoff time.Time
	// Archived is the number of flights copied to flight_history and
	// removed from flight.
	Archived int
	// Tombstones is how many of those were still ACTIVE and got their one
	// deletion (tombstone and FLIGHT_DELETED event).
	Tombstones int
	// Skipped is the number of due flights locked by a processing
	// transaction; the next run takes them (INV-18).
	Skipped int
	// Failed is the number of due flights whose archiving failed; they stay
	// live and the next run tries again (INV-28).
	Failed int
}

// historyDays is the history retention in whole days.
func (e *Engine) historyDays() int {
	d := e.opt.HistoryRetention
	if d <= 0 {
		d = DefaultHistoryRetention
	}
	return int(d / (24 * time.Hour))
}

// RunHistorySweep moves flights whose operation day is more than
// history-retention days before today (airport time) to flight_history
// (R-C11, INV-28, US-14). Each flight has its own transaction: lock the
// row with SKIP LOCKED (a flight a processing transaction holds is skipped
// until the next run, INV-18) re-checking the age, insert its history row,
// write the one deletion of a still-ACTIVE flight, and only then delete the
// live row. A failing flight is counted and logged and the others go on.
func (e *Engine) RunHistorySweep(ctx context.Context) (HistoryResult, error) {
	now := e.clock.Now()
	local := now.In(e.airportZone()).Add(-time.Duration(e.opt.CutoffHour) * time.Hour)
	y, m, d := local.Date()
	res := HistoryResult{Cutoff: time.Date(y, m, d-e.historyDays(), 0, 0, 0, 0, time.UTC)}
	var after int64
	for {
		rows, err := e.pool.Query(ctx, `SELECT flid FROM flight WHERE operation_day < $1 AND flid > $2 ORDER BY flid LIMIT $3`,
			res.Cutoff, after, sweepPage)
		if err != nil {
			return res, fmt.Errorf("listing flights due for history: %w", err)
		}
		flids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return res, fmt.Errorf("listing flights due for history: %w", err)
		}
		for _, flid := range flids {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("sweeping history: %w", err)
			}
			out, err := e.sweepFlight(ctx, flid, res.Cutoff, e.clock.Now())
			switch {
			case err != nil:
				res.Failed++
				e.log.Error("archiving flight failed; kept live until the next run", "flid", flid, "err", err, "alert", "history-sweep-failed")
			case out == sweptArchived:
				res.Archived++
			case out == sweptTombstoned:
				res.Archived++
				res.Tombstones++
			case out == sweptLocked:
				res.Skipped++
				e.log.Info("flight locked by processing; archived next run", "flid", flid)
			}
		}
		if len(flids) < sweepPage {
			break
		}
		after = flids[len(flids)-1]
	}
	e.log.Info("history sweep done", "archived", res.Archived, "tombstones", res.Tombstones,
		"skipped", res.Skipped, "failed", res.Failed, "operation_day_before", res.Cutoff.Format(time.DateOnly))
	return res, nil
}

// sweepOutcome is what happened to one flight in the sweep.
type sweepOutcome int

const (
	sweptGone       sweepOutcome = iota // deleted or no longer due meanwhile
	sweptArchived                       // archived and removed (already DELETED)
	sweptTombstoned                     // archived, removed, deletion emitted
	sweptLocked                         // held by a processing transaction
)

// errMasterLocked means the master of a swept child is held by a
// processing transaction: the child waits for the next run (INV-18).
var errMasterLocked = errors.New("code-share master locked by processing")

// sweptMaster is the live ACTIVE master of a code-share child the history
// sweep purges, locked in the sweep's transaction.
type sweptMaster struct {
	flid, version, lastMsgID int64
	opDay                    *time.Time
	doc                      flight.Doc
}

// lockSweptMaster locks the master flid of a child being purged, without
// waiting (SKIP LOCKED, like the child). It returns nil when the master is
// gone or not ACTIVE (it has no MAFL to keep), errMasterLocked when a
// processing transaction holds it.
func lockSweptMaster(ctx context.Context, tx pgx.Tx, flid int64) (*sweptMaster, error) {
	var (
		m     = sweptMaster{flid: flid}
		state string
		doc   []byte
	)
	err := tx.QueryRow(ctx, `SELECT state, state_version, last_msg_id, operation_day, doc FROM flight WHERE flid=$1 FOR UPDATE SKIP LOCKED`, flid).
		Scan(&state, &m.version, &m.lastMsgID, &m.opDay, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flight WHERE flid=$1)`, flid).Scan(&exists); err != nil {
			return nil, fmt.Errorf("checking code-share master %d: %w", flid, err)
		}
		if exists {
			return nil, errMasterLocked
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("locking code-share master %d: %w", flid, err)
	}
	if state != "ACTIVE" {
		return nil, nil
	}
	if err := json.Unmarshal(doc, &m.doc); err != nil {
		return nil, fmt.Errorf("reading code-share master %d document: %w", flid, err)
	}
	return &m, nil
}

// refresh rewrites the master's MAFL from its ACTIVE children once the
// swept child's row is gone (R-C8, INV-21, INV-22): when it changed, the
// master gets the next version and its events — the msgx.flight-state
// record, FLIGHT_UPDATED with reason history-sweep and the schd record, in
// the contract's formats with SIS times read in zone — in the sweep's
// transaction, like the deletion it follows, with no message (msg_id
// NULL, no source, no pending projection; the flight-state record names
// the master's last message, as a projection rebuild does).
func (m *sweptMaster) refresh(ctx context.Context, tx pgx.Tx, zone *time.Location, now time.Time) error {
	rows, err := tx.Query(ctx, `SELECT flid, COALESCE(doc->>'FLNO', '') FROM flight
		WHERE master_flid=$1 AND state='ACTIVE' AND flid<>$1 ORDER BY flid`, m.flid)
	if err != nil {
		return fmt.Errorf("listing code-share children of %d: %w", m.flid, err)
	}
	kids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (flight.Child, error) {
		var c flight.Child
		err := r.Scan(&c.FLID, &c.FLNO)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("listing code-share children of %d: %w", m.flid, err)
	}
	doc := flight.Derive(m.doc, m.flid, kids)
	if flight.Equal(m.doc, doc) {
		return nil
	}
	version := m.version + 1
	canonical := doc.Canonical() // stored, and reused in the three payloads
	if _, err := tx.Exec(ctx, `UPDATE flight SET state_version=$2, doc=$3, updated_at=$4 WHERE flid=$1`,
		m.flid, version, canonical, now); err != nil {
		return fmt.Errorf("rewriting code-share master %d: %w", m.flid, err)
	}
	rec, err := flightstate.EncodeCanonical(m.flid, version, flightstate.StateActive, m.opDay, m.lastMsgID, doc, canonical)
	if err != nil {
		return err
	}
	day := ""
	if m.opDay != nil {
		day = m.opDay.Format(time.DateOnly)
	}
	change := contract.Change{FLID: m.flid, StateVersion: version, EventType: EventUpdated, OperationDay: day,
		Changed: decide.ChangedKeys(m.doc, doc), Reason: historySweepReason, OccurredAt: now, Flight: doc, FlightJSON: canonical}
	ev, st, err := contract.Encoder{Zone: zone}.Records(change)
	if err != nil {
		return err
	}
	key := strconv.FormatInt(m.flid, 10)
	if _, err := tx.Exec(ctx, `
		INSERT INTO outbox (target, pkey, payload, headers, next_attempt_at, created_at) VALUES
			($1, $4, $5, $6, $11, $11),
			($2, $4, $7, $8, $11, $11),
			($3, $4, $9, $10, $11, $11)`,
		TargetFlightState, TargetMsg, TargetSchd, key, rec.Value, mustJSON(rec.Headers),
		ev.Value, mustJSON(ev.Headers), st.Value, mustJSON(st.Headers), now); err != nil {
		return fmt.Errorf("writing events of code-share master %d: %w", m.flid, err)
	}
	return nil
}

// queueDeletion writes the outbox rows of a flight deletion that no message
// caused: the msgx.flight-state tombstone, the FLIGHT_DELETED event with
// its reason, and the schd tombstone, in the formats of writer.emit, with
// no msg_id. version is the deletion's version (the last one plus one).
func queueDeletion(ctx context.Context, q querier, flid, version int64, opDay, reason string, now time.Time) error {
	key := strconv.FormatInt(flid, 10)
	headers := mustJSON(map[string]string{"msgx-version": strconv.FormatInt(version, 10)})
	change := contract.Change{FLID: flid, StateVersion: version, EventType: EventDeleted, OperationDay: opDay,
		Changed: []string{}, Reason: reason, OccurredAt: now}
	ev, err := contract.Encoder{}.Msg(change) // a deletion has no SIS times: no zone needed
	if err != nil {
		return err
	}
	tomb, err := contract.Encoder{}.Schd(change)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `
		INSERT INTO outbox (target, pkey, payload, headers, next_attempt_at, created_at) VALUES
			($1, $4, NULL, $5, $7, $7),
			($2, $4, $6, $8, $7, $7),
			($3, $4, NULL, $9, $7, $7)`,
		TargetFlightState, TargetMsg, TargetSchd, key, headers, ev.Value, now,
		mustJSON(ev.Headers), mustJSON(tomb.Headers))
	if err != nil {
		return fmt.Errorf("writing deletion of flight %d: %w", flid, err)
	}
	return nil
}
