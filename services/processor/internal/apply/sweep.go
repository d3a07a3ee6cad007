package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/flight"
	"msgexchange/services/processor/internal/decide"
)

// Sweep is decide's SweepView and SweepSink over the transaction of one
// flight of the history sweep. It locks rows without waiting: the sweep
// never queues behind a processing transaction (INV-18).
type Sweep struct{ Tx pgx.Tx }

// Due locks flid without waiting when its operation day is before cutoff.
func (s Sweep) Due(ctx context.Context, flid int64, cutoff time.Time) (*decide.Flight, bool, error) {
	var (
		f     = decide.Flight{FLID: flid}
		opDay time.Time
	)
	err := s.Tx.QueryRow(ctx, `
		SELECT state, state_version, operation_day, master_flid FROM flight
		WHERE flid=$1 AND operation_day < $2 FOR UPDATE SKIP LOCKED`, flid, cutoff).Scan(&f.State, &f.Version, &opDay, &f.Master)
	if errors.Is(err, pgx.ErrNoRows) {
		// Either a processing transaction holds the row (a plain read does
		// not wait for row locks) or it is gone or no longer due.
		var due bool
		if err := s.Tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flight WHERE flid=$1 AND operation_day < $2)`, flid, cutoff).Scan(&due); err != nil {
			return nil, false, fmt.Errorf("checking flight %d: %w", flid, err)
		}
		return nil, due, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("locking flight %d: %w", flid, err)
	}
	f.OpDay = &opDay
	return &f, false, nil
}

// Master locks flid without waiting, with its document and last message.
func (s Sweep) Master(ctx context.Context, flid int64) (*decide.Flight, bool, error) {
	var (
		f   = decide.Flight{FLID: flid}
		doc []byte
	)
	err := s.Tx.QueryRow(ctx, `SELECT state, state_version, last_msg_id, operation_day, master_flid, doc FROM flight WHERE flid=$1 FOR UPDATE SKIP LOCKED`, flid).
		Scan(&f.State, &f.Version, &f.LastMsgID, &f.OpDay, &f.Master, &doc)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := s.Tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flight WHERE flid=$1)`, flid).Scan(&exists); err != nil {
			return nil, false, fmt.Errorf("checking code-share master %d: %w", flid, err)
		}
		return nil, exists, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("locking code-share master %d: %w", flid, err)
	}
	if err := json.Unmarshal(doc, &f.Doc); err != nil {
		return nil, false, fmt.Errorf("reading code-share master %d document: %w", flid, err)
	}
	return &f, false, nil
}

// Children lists the ACTIVE code-share children of flid.
func (s Sweep) Children(ctx context.Context, flid int64) ([]flight.Child, error) {
	return TxView(s).Children(ctx, flid)
}

// Archive copies flid to flight_history (a version already archived is not
// written again), writes tomb's outbox rows, and removes the live row.
func (s Sweep) Archive(ctx context.Context, flid int64, tomb *decide.Change, now time.Time) error {
	if _, err := s.Tx.Exec(ctx, `
		INSERT INTO flight_history (flid, state_version, operation_day, state, master_flid, last_msg_id, doc, created_at, updated_at, archived_at)
		SELECT flid, state_version, operation_day, state, master_flid, last_msg_id, doc, created_at, updated_at, $2
		FROM flight WHERE flid=$1
		ON CONFLICT (flid, state_version) DO NOTHING`, flid, now); err != nil {
		return fmt.Errorf("archiving flight %d: %w", flid, err)
	}
	if tomb != nil {
		b := &pgx.Batch{}
		queueOutbox(b, tomb.Outbox)
		if err := s.Tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("writing deletion of flight %d: %w", flid, err)
		}
	}
	if _, err := s.Tx.Exec(ctx, `DELETE FROM flight WHERE flid=$1`, flid); err != nil {
		return fmt.Errorf("removing flight %d: %w", flid, err)
	}
	return nil
}

// Change writes a master's new version and document with its outbox rows,
// in one round trip; its last message is left as it is.
func (s Sweep) Change(ctx context.Context, c *decide.Change) error {
	b := &pgx.Batch{}
	b.Queue(`UPDATE flight SET state_version=$2, doc=$3, updated_at=$4 WHERE flid=$1`, c.Row.FLID, c.Row.Version, c.Canonical, c.Now)
	queueOutbox(b, c.Outbox)
	if err := s.Tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("writing code-share master %d and its events: %w", c.Row.FLID, err)
	}
	return nil
}
