package pipeline

import (
	"encoding/json"
	"fmt"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/internal/outbox"
)

// Targets of outbox rows (services/internal/outbox); the dispatcher
// relays each target on its own.
const (
	TargetFlightState = outbox.FlightState
	TargetMsg         = outbox.Msg
	TargetSchd        = outbox.Schd
	TargetMailbox     = outbox.Mailbox
)

// FlightState is the value of a msgx.flight-state record (schema 1); the
// record format is shared with the control plane's projection rebuild.
type FlightState = flightstate.Value

// Source identifies the message that caused an event; the type is the
// external contract's (services/internal/contract).
type Source = contract.Source

// Event is the value of a record on the external msg topic (schema
// version 2, services/internal/contract): one event per flight change.
type Event = contract.Event

// Event types.
const (
	EventCreated = contract.EventCreated
	EventUpdated = contract.EventUpdated
	EventDeleted = contract.EventDeleted
)

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding event: %v", err)) // only plain data is encoded
	}
	return b
}
