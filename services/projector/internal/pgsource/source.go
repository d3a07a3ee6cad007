package pgsource

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/projector/internal/store"
)

// DB is what the source needs of a PostgreSQL pool; *pgxpool.Pool
// implements it.
type DB interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Source reads flights from PostgreSQL.
type Source struct {
	db      DB
	timeout time.Duration
}

// New returns a Source on db; timeout bounds each query.
func New(db DB, timeout time.Duration) *Source {
	return &Source{db: db, timeout: timeout}
}

// Version is a flight's current version in PostgreSQL.
type Version struct {
	FLID    int64
	Version int64
	// Deleted is true for a DELETED flight (the projection holds its
	// version without a document).
	Deleted bool
}

// readOnly runs fn in a READ ONLY transaction bounded by the source's
// timeout.
func (s *Source) readOnly(ctx context.Context, what string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	qctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := pgx.BeginTxFunc(qctx, s.db, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return fn(qctx, tx)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Page returns the records of at most limit flights with a FLID greater
// than after, in FLID order, as repair updates for the projection (a
// rebuild from PostgreSQL restores the version Redis holds when its
// document is lost or differs; it never writes an older version). An
// empty page is the end.
func (s *Source) Page(ctx context.Context, after int64, limit int) ([]store.Update, error) {
	var out []store.Update
	err := s.readOnly(ctx, "reading flights from postgresql", func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT flid, state, state_version, operation_day, last_msg_id, doc
			FROM flight WHERE flid > $1 ORDER BY flid LIMIT $2`, after, limit)
		if err != nil {
			return err
		}
		out, err = collectUpdates(rows, limit)
		return err
	})
	return out, err
}

// Flights returns the current records of the given flights as repair
// updates, in FLID order; flights PostgreSQL does not have are left out.
func (s *Source) Flights(ctx context.Context, flids []int64) ([]store.Update, error) {
	if len(flids) == 0 {
		return nil, nil
	}
	var out []store.Update
	err := s.readOnly(ctx, "reading flights from postgresql", func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT flid, state, state_version, operation_day, last_msg_id, doc
			FROM flight WHERE flid = ANY($1) ORDER BY flid`, flids)
		if err != nil {
			return err
		}
		out, err = collectUpdates(rows, len(flids))
		return err
	})
	return out, err
}

// collectUpdates encodes every row of a flight query.
func collectUpdates(rows pgx.Rows, capacity int) ([]store.Update, error) {
	defer rows.Close()
	out := make([]store.Update, 0, capacity)
	for rows.Next() {
		var (
			flid, version, msgID int64
			state                string
			opDay                *time.Time
			raw                  []byte
		)
		if err := rows.Scan(&flid, &state, &version, &opDay, &msgID, &raw); err != nil {
			return nil, err
		}
		var doc flight.Doc
		if state == flightstate.StateActive {
			if err := json.Unmarshal(raw, &doc); err != nil {
				return nil, fmt.Errorf("decoding document of flight %d: %w", flid, err)
			}
		}
		rec, err := flightstate.Encode(flid, version, state, opDay, msgID, doc)
		if err != nil {
			return nil, err
		}
		out = append(out, store.Update{FLID: flid, Version: version, Value: rec.Value, Repair: true})
	}
	return out, rows.Err()
}

// CountSettled returns how many flights last changed at least settle ago
// (by the database's clock).
func (s *Source) CountSettled(ctx context.Context, settle time.Duration) (int64, error) {
	var n int64
	err := s.readOnly(ctx, "counting flights in postgresql", func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT count(*) FROM flight WHERE updated_at <= now() - make_interval(secs => $1)`,
			settle.Seconds()).Scan(&n)
	})
	return n, err
}

// Sample returns the records of at most n flights chosen at random among
// those last changed at least settle ago, as repair updates. A flight
// changed more recently may still have its record on the way through the
// outbox and Kafka, so Redis being behind it says nothing yet.
func (s *Source) Sample(ctx context.Context, n int, settle time.Duration) ([]store.Update, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []store.Update
	err := s.readOnly(ctx, "sampling flights in postgresql", func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT flid, state, state_version, operation_day, last_msg_id, doc FROM flight
			WHERE updated_at <= now() - make_interval(secs => $1)
			ORDER BY random() LIMIT $2`, settle.Seconds(), n)
		if err != nil {
			return err
		}
		out, err = collectUpdates(rows, n)
		return err
	})
	return out, err
}

// Versions returns the current versions of the given flights; flights
// PostgreSQL does not have are left out.
func (s *Source) Versions(ctx context.Context, flids []int64) (map[int64]Version, error) {
	out := make(map[int64]Version, len(flids))
	if len(flids) == 0 {
		return out, nil
	}
	err := s.readOnly(ctx, "reading flight versions from postgresql", func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT flid, state_version, state = $2 FROM flight WHERE flid = ANY($1)`,
			flids, flightstate.StateDeleted)
		if err != nil {
			return err
		}
		vs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Version])
		for _, v := range vs {
			out[v.FLID] = v
		}
		return err
	})
	return out, err
}
