// Package outbox is the contract of the outbox table between the services
// that write it — the processor (flight events, backfill intents), the
// control plane (projection rebuilds, ended messages, outbound requests) —
// and the dispatcher, which relays each target on its own: the target
// names, and the one statement shape that writes a message's mailbox
// intent. Services never import each other; they share these names here
// so a target cannot be spelt two ways.
package outbox

import "strconv"

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
