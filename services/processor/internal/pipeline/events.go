package pipeline

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

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

// Source identifies the message that caused an event.
type Source struct {
	MsgID   int64  `json:"msg_id"`
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Sender  string `json:"sender"`
	Seqn    string `json:"seqn"`
}

// Event is the value of a record on the external msg topic (schema 1): one
// event per flight change. EventID is stable for a (FLID, version), so a
// consumer drops duplicates by EventID and stale changes by StateVersion.
type Event struct {
	SchemaVersion int        `json:"schema_version"`
	EventID       string     `json:"event_id"`
	EventType     string     `json:"event_type"`
	FLID          int64      `json:"flid"`
	StateVersion  int64      `json:"state_version"`
	OperationDay  string     `json:"operation_day,omitempty"`
	Changed       []string   `json:"changed"`
	Source        Source     `json:"source"`
	OccurredAt    time.Time  `json:"occurred_at"`
	Flight        flight.Doc `json:"flight"`
	// Reason says why a deletion no message caused happened, e.g.
	// "history-sweep" (R-C11); absent for message-driven changes.
	Reason string `json:"reason,omitempty"`
}

// Event types.
const (
	EventCreated = "FLIGHT_CREATED"
	EventUpdated = "FLIGHT_UPDATED"
	EventDeleted = "FLIGHT_DELETED"
)

func eventID(flid, version int64) string {
	return "flight-" + strconv.FormatInt(flid, 10) + "-v" + strconv.FormatInt(version, 10)
}

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
