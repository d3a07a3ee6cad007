package apply

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations"
	"msgexchange/services/internal/flight"
	"msgexchange/services/processor/internal/decide"
	"msgexchange/services/processor/internal/sistest"
)

// db is the package's one migrated database. Every test works in a
// transaction of its own that its end rolls back (begin), so the tests
// share the database without seeing each other's rows, and the package
// pays for one migration instead of one per test.
var db = pgtest.Shared{Setup: migrations.Up}

func TestMain(m *testing.M) { goleak.VerifyTestMain(db.Main(m)) }

// t0 is when the decisions of these tests are made.
var t0 = sistest.T0

// day23 is the operation day of the tests' flights.
var day23 = time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)

// lastBase hands out the tests' ID ranges (fresh).
var lastBase atomic.Int64

// fresh returns the base of an ID range no other test of the run uses:
// the test's flights, messages and keys are base+1 … base+999. Tests run
// in parallel on one database, and two open transactions writing the same
// key would wait for each other.
func fresh() int64 { return lastBase.Add(1000) }

// setup is a test's context, its transaction (begin) and the base of its
// IDs (fresh), with the messages base+1 … base+msgs registered for the
// decisions that name them.
func setup(t *testing.T, msgs int) (context.Context, pgx.Tx, int64) {
	t.Helper()
	tx, base := begin(t), fresh()
	for i := range int64(msgs) {
		addMessage(t, tx, base+1+i, nil, nil)
	}
	return t.Context(), tx, base
}

// begin returns a transaction on the package's database on a connection
// of the test's own, rolled back and closed when the test ends.
func begin(t *testing.T) pgx.Tx {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// commit runs sql in a transaction of its own that commits, for the rows
// a test needs another transaction to see; undo, run when the test ends,
// removes them.
func commit(t *testing.T, sql, undo string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), db.URL(t))
		require.NoError(t, err)
		defer c.Close(context.Background())
		_, err = c.Exec(context.Background(), undo, args...)
		require.NoError(t, err)
	})
}

// exec runs sql in tx.
func exec(t *testing.T, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	_, err := tx.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// count returns the single integer sql selects in tx.
func count(t *testing.T, tx pgx.Tx, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, tx.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// addMessage registers message id, executing since started (nil: never
// started) and received from the mailbox at received (nil: unknown).
func addMessage(t *testing.T, tx pgx.Tx, id int64, started, received *time.Time) {
	t.Helper()
	exec(t, tx, `INSERT INTO proc_state (msg_id, raw, kafka_offset, state, registered_at, updated_at, processing_started_at, received_at)
		VALUES ($1, '<MSG/>', $1, 'PENDING', $2, $2, $3, $4)`, id, t0.Add(-time.Hour), started, received)
}

// addFlight stores a flight row as an earlier message left it: ACTIVE or
// DELETED at version v, of day23, with its code-share master (0: none) and
// document, written by message last at t0 - 1h.
func addFlight(t *testing.T, tx pgx.Tx, flid int64, state string, v, master, last int64, doc flight.Doc) {
	t.Helper()
	var m *int64
	if master != 0 {
		m = &master
	}
	exec(t, tx, `INSERT INTO flight (flid, operation_day, state, state_version, master_flid, last_msg_id, doc, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, flid, day23, state, v, m, last, doc.Canonical(), t0.Add(-time.Hour))
}

// addHistory stores an archived version of flid in flight_history.
func addHistory(t *testing.T, tx pgx.Tx, flid int64, state string, v int64) {
	t.Helper()
	exec(t, tx, `INSERT INTO flight_history (flid, state_version, operation_day, state, last_msg_id, doc, created_at, updated_at, archived_at)
		VALUES ($1, $2, $3, $4, 1, '{}', $5, $5, $5)`, flid, v, day23, state, t0.Add(-time.Hour))
}

// flightRow is a flight row as these tests check it.
type flightRow struct {
	State              string
	Version, LastMsgID int64
	OpDay              *time.Time
	Master             *int64
	Doc                map[string]any
	Created, Updated   time.Time
}

// readFlight reads flid's row; the test fails without one.
func readFlight(t *testing.T, tx pgx.Tx, flid int64) flightRow {
	t.Helper()
	var r flightRow
	var doc []byte
	require.NoError(t, tx.QueryRow(context.Background(), `
		SELECT state, state_version, last_msg_id, operation_day, master_flid, doc, created_at, updated_at FROM flight WHERE flid=$1`, flid).
		Scan(&r.State, &r.Version, &r.LastMsgID, &r.OpDay, &r.Master, &doc, &r.Created, &r.Updated), "flight %d", flid)
	r.Created, r.Updated = r.Created.UTC(), r.Updated.UTC()
	require.NoError(t, json.Unmarshal(doc, &r.Doc))
	return r
}

// outboxRow is an outbox row as these tests check it.
type outboxRow struct {
	Target, Pkey, Payload, Headers string
	MsgID                          *int64
	Due, Created                   time.Time
}

// outboxOf lists the outbox rows of the keys in ID order.
func outboxOf(t *testing.T, tx pgx.Tx, keys ...int64) []outboxRow {
	t.Helper()
	pkeys := make([]string, len(keys))
	for i, k := range keys {
		pkeys[i] = formatID(k)
	}
	rows, err := tx.Query(context.Background(), `SELECT target, pkey, COALESCE(convert_from(payload, 'UTF8'), ''), COALESCE(headers::text, ''),
		msg_id, next_attempt_at, created_at FROM outbox WHERE pkey = ANY($1) ORDER BY id`, pkeys)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outboxRow, error) {
		var o outboxRow
		return o, r.Scan(&o.Target, &o.Pkey, &o.Payload, &o.Headers, &o.MsgID, &o.Due, &o.Created)
	})
	require.NoError(t, err)
	return out
}

// pending maps each flight of message id's pending projections to its
// version.
func pending(t *testing.T, tx pgx.Tx, id int64) map[int64]int64 {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT flid, version FROM projection_pending WHERE msg_id=$1`, id)
	require.NoError(t, err)
	out := map[int64]int64{}
	var flid, v int64
	_, err = pgx.ForEachRow(rows, []any{&flid, &v}, func() error { out[flid] = v; return nil })
	require.NoError(t, err)
	return out
}

// put is the decision to write flid ACTIVE at version v with doc for
// message msg at time at, with its flight-state and msg rows.
func put(msg, flid, v int64, doc flight.Doc, at time.Time) *decide.Change {
	d := day23
	row := decide.Flight{FLID: flid, State: "ACTIVE", Version: v, OpDay: &d, Doc: doc}
	if m, ok := doc.MasterFLID(); ok {
		row.Master = &m
	}
	return &decide.Change{Row: row, Canonical: doc.Canonical(), MsgID: msg, Now: at, Outbox: events(msg, flid, v, doc.Canonical(), at)}
}

// remove is the decision to delete flid (stored at version v-1) at
// version v for message msg at time at: no document, a tombstone.
func remove(msg, flid, v int64, at time.Time) *decide.Change {
	d := day23
	row := decide.Flight{FLID: flid, State: "DELETED", Version: v, OpDay: &d}
	return &decide.Change{Row: row, MsgID: msg, Now: at, Outbox: events(msg, flid, v, nil, at)}
}

// events are the outbox rows of version v of flid, one per target: the
// flight-state row's payload is the document (nil: a tombstone) and its
// headers name the version; the msg and schd rows name the version in
// their payload and have no headers.
func events(msg, flid, v int64, payload []byte, at time.Time) []decide.OutboxRow {
	key, ver := formatID(flid), formatID(v)
	return []decide.OutboxRow{
		{Target: decide.TargetFlightState, Pkey: key, Payload: payload, Headers: []byte(`{"msgx-version": "` + ver + `"}`), MsgID: msg, At: at},
		{Target: decide.TargetMsg, Pkey: key, Payload: []byte(`{"v":` + ver + `}`), MsgID: msg, At: at},
		{Target: decide.TargetSchd, Pkey: key, Payload: []byte(`{"v":` + ver + `}`), MsgID: msg, At: at},
	}
}

// targets lists the targets of rows in order.
func targets(rows []outboxRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Target
	}
	return out
}

// keysOf returns the keys of m, sorted.
func keysOf[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// formatID is id in decimal, as keys and documents carry it.
func formatID(id int64) string { return strconv.FormatInt(id, 10) }

// doc is a flight document of flid with extra elements (name, value…).
func doc(flid int64, kv ...string) flight.Doc {
	d := flight.Doc{"FLID": formatID(flid), "FLNO": "YG" + formatID(flid)}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i]] = kv[i+1]
	}
	return d
}
