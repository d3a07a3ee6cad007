package pipeline

import (
	"encoding/json"
	"fmt"
	"sort"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
)

// Targets of outbox rows; the dispatcher relays each target on its own.
const (
	TargetFlightState = "flight-state"
	TargetMsg         = "msg"
	TargetSchd        = "schd"
	TargetMailbox     = "mailbox"
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

func eventID(flid, version int64) string { return contract.EventID(flid, version) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding event: %v", err)) // only plain data is encoded
	}
	return b
}

// changedKeys lists the top-level elements that differ between two documents.
func changedKeys(before, after flight.Doc) []string {
	out := []string{}
	seen := map[string]bool{}
	for k, v := range after {
		seen[k] = true
		if bv, ok := before[k]; !ok || string(mustJSON(bv)) != string(mustJSON(v)) {
			out = append(out, k)
		}
	}
	for k := range before {
		if !seen[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
