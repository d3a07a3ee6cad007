package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/flight"
	"msgexchange/services/processor/internal/decide"
)

// SeasonWindow reads a stored season window with its pattern documents in
// order, locking the window row, so two packages of one window are applied
// one after the other.
func (v TxView) SeasonWindow(ctx context.Context, key decide.SeasonKey) (*decide.SeasonWindow, error) {
	var id int64
	var stored []json.RawMessage
	err := v.Tx.QueryRow(ctx, `
		SELECT s.id, COALESCE((SELECT array_agg(f.doc ORDER BY f.seq) FROM season_flight f WHERE f.season_id = s.id), '{}')
		FROM season_schedule s WHERE snam=$1 AND apcd=$2 AND sdat=$3 AND edat=$4 FOR UPDATE`,
		key.SNAM, key.APCD, key.SDAT, key.EDAT).Scan(&id, &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading season window: %w", err)
	}
	win := &decide.SeasonWindow{ID: id, Docs: make([]flight.Doc, len(stored))}
	for i, raw := range stored {
		if err := json.Unmarshal(raw, &win.Docs[i]); err != nil {
			win.Unreadable = true
		}
	}
	return win, nil
}

// SeasonReplace creates the window when it is new, then replaces its
// patterns and its count in one round trip.
func (s TxSink) SeasonReplace(ctx context.Context, op decide.SeasonReplace) error {
	id := op.ID
	if id == 0 {
		err := s.Tx.QueryRow(ctx, `
			INSERT INTO season_schedule (snam, apcd, sdat, edat, start_date, end_date, flights, last_msg_id, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8) RETURNING id`,
			op.Key.SNAM, op.Key.APCD, op.Key.SDAT, op.Key.EDAT, op.Start, op.End, op.MsgID, op.Now).Scan(&id)
		if err != nil {
			return fmt.Errorf("creating season window: %w", err)
		}
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM season_flight WHERE season_id=$1`, id)
	for i, d := range op.Docs {
		b.Queue(`INSERT INTO season_flight (season_id, seq, alcd, flno, mvin, doc) VALUES ($1, $2, $3, $4, $5, $6)`,
			id, i+1, d.String("ALCD"), d.String("FLNO"), d.String("MVIN"), d.Canonical())
	}
	b.Queue(`UPDATE season_schedule SET flights=$2, last_msg_id=$3, updated_at=$4 WHERE id=$1`, id, len(op.Docs), op.MsgID, op.Now)
	return s.Tx.SendBatch(ctx, b).Close()
}
