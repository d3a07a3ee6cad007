// Package outbox is the contract of the outbox table between the services
// that write it — the processor (flight events, backfill intents), the
// control plane (projection rebuilds, ended messages, outbound requests) —
// and the dispatcher, which relays each target on its own: the target
// names, and the statement tails that write a message's mailbox intent
// with its terminal state (InsertMailboxIntent; InsertInOrder for a
// batch's outbox in decision order). Services never import each other; they share these names here
// so a target cannot be spelt two ways.
package outbox

import (
	"strconv"
	"time"
)

// Row is an outbox row as a decision writes it: a flight's event or
// state, or a message's mailbox intent.
type Row struct {
	Target, Pkey string
	Payload      []byte
	// Headers is JSON, nil for none.
	Headers []byte
	// MsgID is the message that caused the row, 0 for none.
	MsgID int64
	At    time.Time
}

// Targets of outbox rows.
const (
	// FlightState rows are relayed to msgx.flight-state (key FLID), the
	// projector's input.
	FlightState = "flight-state"
	// Msg rows are relayed to the external msg topic (flight events).
	Msg = "msg"
	// Schd rows are relayed to the external schd topic, the latest state
	// of each flight per flush period.
	Schd = "schd"
	// Mailbox rows are backfill intents: the dispatcher writes the
	// message's "processed" marker to the mailbox (INV-8).
	Mailbox = "mailbox"
	// ProjectionControl carries the control plane's projection rebuild
	// manifests to msgx.projection-control (R-E4).
	ProjectionControl = "projection-control"
	// Coutmsgs rows are outbound requests the dispatcher inserts into
	// COUTMSGS: pkey is the req_track ID, payload the request XML (R-D5).
	Coutmsgs = "coutmsgs"
)

// InsertMailboxIntent returns the INSERT that ends a WITH statement whose
// common table expression cte (a name) makes messages terminal and
// returns their msg_id: it writes each one's mailbox intent, created and
// due at the statement's parameter $at. The terminal state and its intent
// are then one statement, so neither is ever written without the other
// (INV-8). Callers build their statement once, at package level.
func InsertMailboxIntent(cte string, at int) string {
	p := "$" + strconv.Itoa(at)
	return `INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		SELECT '` + Mailbox + `', msg_id::text, msg_id, ` + p + `, ` + p + ` FROM ` + cte
}

// InsertInOrder returns two common table expressions, x and o, that
// follow the expression cte of a WITH statement which makes messages
// terminal and returns their msg_id and finished_at: o writes the outbox
// rows given as the arrays $p to $p+5 (target, pkey, payload, headers as
// JSON text, msg_id with 0 for none, time) in their order, and the mailbox
// intent of every message the CTE finished, due and created at its
// finished_at. A mailbox row in the arrays only places the intent of its
// message there and is written only if the CTE finished that message;
// intents without a place follow the rows in msg_id order. A batch thus
// writes its outbox in decision order — the same rows, their IDs in the
// same order, as one message at a time — and a terminal state never
// exists without its intent nor an intent without its terminal state
// (INV-8). PostgreSQL runs a data-modifying CTE whether or not the
// statement reads it.
func InsertInOrder(cte string, p int) string {
	arg := func(i int) string { return "$" + strconv.Itoa(p+i) }
	return `x AS (
		SELECT * FROM unnest(` + arg(0) + `::text[], ` + arg(1) + `::text[], ` + arg(2) + `::bytea[], ` + arg(3) + `::text[], ` +
		arg(4) + `::bigint[], ` + arg(5) + `::timestamptz[]) WITH ORDINALITY AS x(t, k, p, h, m, a, ord)),
	o AS (
		INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at)
		SELECT t, k, p, h::jsonb, NULLIF(m, 0), a, a FROM (
			SELECT t, k, p, h, m, a, ord FROM x WHERE t <> '` + Mailbox + `'
			UNION ALL
			SELECT '` + Mailbox + `', c.msg_id::text, NULL, NULL, c.msg_id, c.finished_at, COALESCE(pl.ord, cardinality(` + arg(0) + `::text[]) + c.msg_id)
			FROM ` + cte + ` c LEFT JOIN (SELECT m, min(ord) AS ord FROM x WHERE t = '` + Mailbox + `' GROUP BY m) pl ON pl.m = c.msg_id) r
		ORDER BY ord
		RETURNING id)`
}
