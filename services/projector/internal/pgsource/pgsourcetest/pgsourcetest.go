// Package pgsourcetest gives the projector's tests a migrated PostgreSQL
// database of their own and writes flights into it as the processor does,
// so that a rebuild or a consistency check reads real rows (R-H5).
package pgsourcetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgexchange/migrations/migratetest"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
)

// NewPool creates a migrated database for the test and returns a pool on
// it, closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := migratetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("connecting to the test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Flight is one row of the flight table.
type Flight struct {
	FLID    int64
	Version int64
	Deleted bool
	MsgID   int64
	Doc     flight.Doc
}

// opDay is the operation day of every test flight.
var opDay = time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)

// NewFlight returns flight flid at version with a small document.
func NewFlight(flid, version int64) Flight {
	return Flight{FLID: flid, Version: version, MsgID: 1000 + version, Doc: flight.Doc{
		"FLID": fmt.Sprint(flid), "FLNO": fmt.Sprintf("MU%04d", flid%10000), "SODT": "23JAN211200", "V": fmt.Sprint(version),
	}}
}

// Record is the flight-state value the processor publishes for f (nil
// for a deleted flight): what Redis must hold for it.
func (f Flight) Record(t testing.TB) []byte {
	t.Helper()
	state := flightstate.StateActive
	if f.Deleted {
		state = flightstate.StateDeleted
	}
	day := opDay
	rec, err := flightstate.Encode(f.FLID, f.Version, state, &day, f.MsgID, f.Doc)
	if err != nil {
		t.Fatalf("encoding flight %d: %v", f.FLID, err)
	}
	return rec.Value
}

// Upsert writes flights as the processor does (insert or replace the row,
// updated_at now).
func Upsert(t testing.TB, pool *pgxpool.Pool, flights ...Flight) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const page = 1000
	for start := 0; start < len(flights); start += page {
		chunk := flights[start:min(start+page, len(flights))]
		flids := make([]int64, len(chunk))
		versions := make([]int64, len(chunk))
		states := make([]string, len(chunk))
		msgIDs := make([]int64, len(chunk))
		docs := make([]string, len(chunk))
		for i, f := range chunk {
			flids[i], versions[i], msgIDs[i] = f.FLID, f.Version, f.MsgID
			states[i] = flightstate.StateActive
			if f.Deleted {
				states[i] = flightstate.StateDeleted
			}
			docs[i] = string(f.Doc.Canonical())
		}
		_, err := pool.Exec(ctx, `
			INSERT INTO flight (flid, operation_day, state, state_version, last_msg_id, doc, created_at, updated_at)
			SELECT u.flid, $1, u.state, u.version, u.msg_id, u.doc::jsonb, now(), now()
			FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::text[]) AS u(flid, state, version, msg_id, doc)
			ON CONFLICT (flid) DO UPDATE SET state = EXCLUDED.state, state_version = EXCLUDED.state_version,
				last_msg_id = EXCLUDED.last_msg_id, doc = EXCLUDED.doc, updated_at = EXCLUDED.updated_at`,
			opDay, flids, states, versions, msgIDs, docs)
		if err != nil {
			t.Fatalf("writing %d flights: %v", len(chunk), err)
		}
	}
}

// Mixed returns n flights FLID 1..n at versions 1..3, every fifth one
// deleted.
func Mixed(n int) []Flight {
	out := make([]Flight, n)
	for i := range out {
		flid := int64(i + 1)
		f := NewFlight(flid, 1+flid%3)
		f.Deleted = flid%5 == 0
		out[i] = f
	}
	return out
}
