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

// TxView is decide's View and SeasonView over one message's transaction:
// it reads flights (and season windows) there, locking each row it
// returns.
type TxView struct{ Tx pgx.Tx }

// Flight reads flid with a row lock; nil when it does not exist.

func (v TxView) Flight(ctx context.Context, flid int64) (*decide.Flight, error) {
	var r decide.Flight
	var doc []byte
	err := v.Tx.QueryRow(ctx, `SELECT flid, state, state_version, operation_day, master_flid, doc FROM flight WHERE flid=$1 FOR UPDATE`, flid).
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

// Children lists the ACTIVE code-share children of flid.
func (v TxView) Children(ctx context.Context, flid int64) ([]flight.Child, error) {
	rows, err := v.Tx.Query(ctx, `SELECT flid, COALESCE(doc->>'FLNO', '') FROM flight
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

// retiredSelect reads the highest version published for archived flights:
// a flight archived while ACTIVE also published its tombstone, one version
// above its history row (R-L1).
const retiredSelect = `SELECT flid, max(state_version + CASE WHEN state = 'ACTIVE' THEN 1 ELSE 0 END)
	FROM flight_history WHERE flid = ANY($1) GROUP BY flid`

// Retired returns the highest version published for flid while it has no
// live row; 0 when it was never archived.
func (v TxView) Retired(ctx context.Context, flid int64) (int64, error) {
	top := map[int64]int64{}
	rows, err := v.Tx.Query(ctx, retiredSelect, []int64{flid})
	if err == nil {
		err = readRetired(rows, top)
	}
	if err != nil {
		return 0, fmt.Errorf("reading archived versions of flight %d: %w", flid, err)
	}
	return top[flid], nil
}

// readRetired adds the rows of retiredSelect to top.
func readRetired(rows pgx.Rows, top map[int64]int64) error {
	defer rows.Close()
	for rows.Next() {
		var flid, v int64
		if err := rows.Scan(&flid, &v); err != nil {
			return err
		}
		top[flid] = v
	}
	return rows.Err()
}

// TxSink is decide's Sink and SeasonSink over one message's transaction:
// it writes each change into the transaction as it is made, with its
// outbox rows and pending projection, in one round trip.
type TxSink struct{ Tx pgx.Tx }

// Change writes one flight change with its outbox rows and pending
// projection.
func (s TxSink) Change(ctx context.Context, c *decide.Change) error {
	b := &pgx.Batch{}
	queueFlightChange(b, c)
	for _, o := range c.Outbox {
		b.Queue(`INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $6)`,
			o.Target, o.Pkey, o.Payload, o.Headers, o.MsgID, o.At)
	}
	b.Queue(`INSERT INTO projection_pending (msg_id, flid, version) VALUES ($1, $2, $3)
	         ON CONFLICT (msg_id, flid) DO UPDATE SET version = GREATEST(projection_pending.version, EXCLUDED.version)`,
		c.MsgID, c.Row.FLID, c.Row.Version)
	if err := s.Tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("writing flight %d and its events: %w", c.Row.FLID, err)
	}
	return nil
}

// queueFlightChange queues the flight row write of one change.
func queueFlightChange(b *pgx.Batch, c *decide.Change) {
	if c.Deleted() {
		b.Queue(`UPDATE flight SET state='DELETED', state_version=$2, last_msg_id=$3, updated_at=$4 WHERE flid=$1`,
			c.Row.FLID, c.Row.Version, c.MsgID, c.Now)
		return
	}
	b.Queue(`
		INSERT INTO flight (flid, operation_day, state, state_version, master_flid, last_msg_id, doc, created_at, updated_at)
		VALUES ($1, $2, 'ACTIVE', $3, $4, $5, $6, $7, $7)
		ON CONFLICT (flid) DO UPDATE SET operation_day=EXCLUDED.operation_day, state='ACTIVE',
			state_version=EXCLUDED.state_version, master_flid=EXCLUDED.master_flid,
			last_msg_id=EXCLUDED.last_msg_id, doc=EXCLUDED.doc, updated_at=EXCLUDED.updated_at`,
		c.Row.FLID, c.Row.OpDay, c.Row.Version, c.Row.Master, c.MsgID, c.Canonical, c.Now)
}

// Ref writes one reference-data upsert or deletion.
func (s TxSink) Ref(ctx context.Context, op decide.RefOp) error {
	sql, args := refStatement(op)
	_, err := s.Tx.Exec(ctx, sql, args...)
	return err
}

// refStatement is the statement of one reference-data write.
func refStatement(op decide.RefOp) (string, []any) {
	switch op.Kind {
	case decide.RefReplace:
		return `DELETE FROM ref_data WHERE type=$1 AND NOT (key = ANY($2))`, []any{op.Type, op.Keys}
	case decide.RefDelete:
		return `DELETE FROM ref_data WHERE type=$1 AND key=$2`, []any{op.Type, op.Key}
	}
	return `
		INSERT INTO ref_data (type, key, doc, last_msg_id, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (type, key) DO UPDATE SET doc=EXCLUDED.doc, last_msg_id=EXCLUDED.last_msg_id, updated_at=EXCLUDED.updated_at
		WHERE ref_data.doc IS DISTINCT FROM EXCLUDED.doc`, []any{op.Type, op.Key, op.Doc, op.MsgID, op.Now}
}
