package contract

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"msgexchange/services/internal/flight"
)

// SchemaVersion is the schema version of both consumer topics. It moves
// only for a change an existing consumer could trip over (a field renamed,
// removed or retyped, a new event type); added optional fields keep it
// (docs/consumer-contract.md, "Compatibility policy").
const SchemaVersion = 2

// Event types: what happened to the flight. The set is closed within a
// schema version.
const (
	EventCreated = "FLIGHT_CREATED"
	EventUpdated = "FLIGHT_UPDATED"
	EventDeleted = "FLIGHT_DELETED"
)

// Record headers, set on every record of msg and schd (the content type
// only where there is content: a tombstone has none).
const (
	// HeaderEventID is the event ID, equal to event_id in the value; the
	// only ID a schd tombstone has. Debezium's outbox router calls it "id".
	HeaderEventID = "msgx-event-id"
	// HeaderEventType is event_type; on a tombstone always FLIGHT_DELETED.
	HeaderEventType = "msgx-event-type"
	// HeaderSchemaVersion is the schema version of the value, decimal, so a
	// consumer can pick its decoder before parsing (and for a tombstone).
	HeaderSchemaVersion = "msgx-schema-version"
	// HeaderStateVersion is state_version, decimal: a tombstone's only
	// version, and what a consumer compares to drop stale records.
	HeaderStateVersion = "msgx-state-version"
	// HeaderMsgID is source.msg_id, the mailbox message that caused the
	// change; absent when no message caused it (the history sweep).
	HeaderMsgID = "msgx-msg-id"
	// HeaderContentType is the media type of the value.
	HeaderContentType = "content-type"
	// HeaderTraceparent and HeaderTracestate carry the W3C trace context
	// of the change when one was recorded.
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// ContentTypeJSON is the media type of every value on msg and schd.
const ContentTypeJSON = "application/json"

// CloudEvents headers (R-N8): every record of msg and schd is also a
// CloudEvent in the binary content mode of the CloudEvents Kafka protocol
// binding 1.0 — each attribute a header "ce_<name>", the data the record's
// value, datacontenttype the content-type header — so consumers that speak
// CloudEvents (Knative, Dapr, the CloudEvents SDKs) read the records
// without knowing the msgx- headers. They are additive: the msgx- headers
// and the value are unchanged (docs/consumer-contract.md, "CloudEvents").
const (
	// HeaderCESpecVersion is specversion, always CloudEventsSpecVersion.
	HeaderCESpecVersion = "ce_specversion"
	// HeaderCEID is id: the event ID (msgx-event-id), stable for a (FLID,
	// state version), so a redelivery carries the same id and a consumer
	// drops duplicates by (source, id).
	HeaderCEID = "ce_id"
	// HeaderCESource is source: SourceMsg or SourceSchd, so the msg event
	// and the schd state of one change, which share their id, are two
	// CloudEvents and not duplicates.
	HeaderCESource = "ce_source"
	// HeaderCEType is type: CloudEventType of the event type.
	HeaderCEType = "ce_type"
	// HeaderCETime is time: occurred_at, RFC 3339 in UTC.
	HeaderCETime = "ce_time"
	// HeaderCESubject is subject: the FLID, decimal (the record key).
	HeaderCESubject = "ce_subject"
	// HeaderCEDataSchema is dataschema: the $id of the value's JSON Schema
	// (docs/schemas); absent on a tombstone, which has no data.
	HeaderCEDataSchema = "ce_dataschema"
)

// CloudEvents attribute values of msg and schd records.
const (
	// CloudEventsSpecVersion is the CloudEvents version the headers follow.
	CloudEventsSpecVersion = "1.0"
	// SourceMsg and SourceSchd are the ce_source of the two topics: the
	// gateway's flight events and flight states, independent of the
	// configured topic names.
	SourceMsg  = "/msgexchange/flight-events"
	SourceSchd = "/msgexchange/flight-states"
	// DataSchemaMsg and DataSchemaSchd are the $id of the value schemas.
	DataSchemaMsg  = "urn:msgexchange:schema:msg:v2"
	DataSchemaSchd = "urn:msgexchange:schema:schd:v2"
)

// CloudEventType returns the ce_type of an event type:
// "msgexchange.flight.created", "msgexchange.flight.updated" or
// "msgexchange.flight.deleted".
func CloudEventType(eventType string) string {
	switch eventType {
	case EventCreated:
		return "msgexchange.flight.created"
	case EventUpdated:
		return "msgexchange.flight.updated"
	default:
		return "msgexchange.flight.deleted"
	}
}

// topic says which topic a record is encoded for: the CloudEvents source
// and data schema differ, the msgx- headers do not.
type topic struct{ source, dataSchema string }

var (
	topicMsg  = topic{source: SourceMsg, dataSchema: DataSchemaMsg}
	topicSchd = topic{source: SourceSchd, dataSchema: DataSchemaSchd}
)

// Source identifies the mailbox message that caused a change.
type Source struct {
	MsgID   int64  `json:"msg_id"`
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Sender  string `json:"sender"`
	Seqn    string `json:"seqn"`
}

// Event is the value of a msg record (schema version 2): one event per
// flight change. EventID is stable for a (FLID, state version), so a
// consumer drops duplicates by EventID and stale changes by StateVersion.
type Event struct {
	SchemaVersion int    `json:"schema_version"`
	EventID       string `json:"event_id"`
	EventType     string `json:"event_type"`
	FLID          int64  `json:"flid"`
	StateVersion  int64  `json:"state_version"`
	// OperationDay is the flight's operation day (YYYY-MM-DD); absent
	// when the flight has none.
	OperationDay string `json:"operation_day,omitempty"`
	// Changed lists the top-level elements of Flight that differ from the
	// previous version, sorted; empty for a deletion.
	Changed []string `json:"changed"`
	// Source is the message that caused the change; absent when none did.
	Source *Source `json:"source,omitempty"`
	// Reason says why a deletion no message caused happened, e.g.
	// "history-sweep" (R-C11); absent for message-driven changes.
	Reason     string    `json:"reason,omitempty"`
	OccurredAt time.Time `json:"occurred_at"`
	// Flight is the whole flight document after the change, null for a
	// deletion. Its SIS times stay as sent (DDMMMYYHHMM, no zone).
	Flight flight.Doc `json:"flight"`
	// Times maps the JSON Pointer (RFC 6901) of every SIS time in Flight
	// to the same time in ISO 8601 with the operation-day zone's offset;
	// empty for a deletion.
	Times map[string]string `json:"times"`
}

// State is the value of a schd record (schema version 2): the latest
// state of an existing flight. A deleted flight is a tombstone instead.
// The fields mean what the msg event's fields of the same name mean; the
// event fields name the change that produced this state.
type State struct {
	SchemaVersion int               `json:"schema_version"`
	EventID       string            `json:"event_id"`
	EventType     string            `json:"event_type"`
	FLID          int64             `json:"flid"`
	StateVersion  int64             `json:"state_version"`
	OperationDay  string            `json:"operation_day,omitempty"`
	Source        *Source           `json:"source,omitempty"`
	OccurredAt    time.Time         `json:"occurred_at"`
	Flight        flight.Doc        `json:"flight"`
	Times         map[string]string `json:"times"`
}

// Change is one committed flight change, the input of both encoders.
type Change struct {
	FLID         int64
	StateVersion int64
	// EventType is EventCreated, EventUpdated or EventDeleted.
	EventType string
	// OperationDay is YYYY-MM-DD, "" when the flight has none.
	OperationDay string
	Changed      []string
	// Source is nil when no message caused the change.
	Source *Source
	// Reason is set for a deletion no message caused.
	Reason     string
	OccurredAt time.Time
	// Flight is the document after the change; nil for a deletion.
	Flight flight.Doc
	// FlightJSON is Flight's canonical JSON (flight.Doc.Canonical) when the
	// caller already holds it, nil otherwise. The encoders then put these
	// bytes in the value instead of encoding Flight again: the writer has
	// encoded the document once to compare and store it, and a second and
	// third encoding cost most of a change's CPU (docs/performance.md,
	// R-J1). The value is byte for byte what encoding Flight gives.
	FlightJSON []byte
	// Trace is the trace context of the change; zero when none.
	Trace Trace
}

// Record is one encoded record as the outbox stores it: the key, the value
// (nil for a tombstone) and the headers.
type Record struct {
	Key     string
	Value   []byte
	Headers map[string]string
}

// Encoder encodes changes for msg and schd. Zone is the operation-day zone
// (operation-day.zone) in which SIS times are read; it may be nil only for
// changes whose document carries no SIS time (deletions).
type Encoder struct {
	Zone *time.Location
}

// EventID returns the event ID of flight flid at version: stable for the
// pair, so a redelivery carries the same ID.
func EventID(flid, version int64) string {
	return "flight-" + strconv.FormatInt(flid, 10) + "-v" + strconv.FormatInt(version, 10)
}

// Msg encodes c as a msg record.
func (e Encoder) Msg(c Change) (Record, error) {
	msg, _, err := e.encode(c, true, false)
	return msg, err
}

// Schd encodes c as a schd record: the state of the flight after the
// change, or a tombstone (nil value) for a deletion.
func (e Encoder) Schd(c Change) (Record, error) {
	_, schd, err := e.encode(c, false, true)
	return schd, err
}

// Records encodes c as its msg record and its schd record, reading the
// document's times and taking its JSON once for both.
func (e Encoder) Records(c Change) (msg, schd Record, err error) {
	return e.encode(c, true, true)
}

// eventHead is Event up to Flight, in Event's order and with its tags: the
// value is this head, then "flight" and "times" appended (appendDocTail),
// so the document's JSON can be reused instead of encoded.
type eventHead struct {
	SchemaVersion int       `json:"schema_version"`
	EventID       string    `json:"event_id"`
	EventType     string    `json:"event_type"`
	FLID          int64     `json:"flid"`
	StateVersion  int64     `json:"state_version"`
	OperationDay  string    `json:"operation_day,omitempty"`
	Changed       []string  `json:"changed"`
	Source        *Source   `json:"source,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	OccurredAt    time.Time `json:"occurred_at"`
}

// stateHead is State up to Flight, as eventHead is for Event.
type stateHead struct {
	SchemaVersion int       `json:"schema_version"`
	EventID       string    `json:"event_id"`
	EventType     string    `json:"event_type"`
	FLID          int64     `json:"flid"`
	StateVersion  int64     `json:"state_version"`
	OperationDay  string    `json:"operation_day,omitempty"`
	Source        *Source   `json:"source,omitempty"`
	OccurredAt    time.Time `json:"occurred_at"`
}

func (e Encoder) encode(c Change, wantMsg, wantSchd bool) (msg, schd Record, err error) {
	if err := c.check(); err != nil {
		return Record{}, Record{}, err
	}
	times, err := Times(c.Flight, e.Zone)
	if err != nil {
		return Record{}, Record{}, fmt.Errorf("encoding change of flight %d: %w", c.FLID, err)
	}
	timesJSON := StringMapJSON(times)
	docJSON, err := flight.JSON(c.Flight, c.FlightJSON)
	if err != nil {
		return Record{}, Record{}, fmt.Errorf("encoding document of flight %d: %w", c.FLID, err)
	}
	id := EventID(c.FLID, c.StateVersion)
	if wantMsg {
		changed := c.Changed
		if changed == nil {
			changed = []string{}
		}
		head, err := json.Marshal(eventHead{
			SchemaVersion: SchemaVersion, EventID: id, EventType: c.EventType,
			FLID: c.FLID, StateVersion: c.StateVersion, OperationDay: c.OperationDay, Changed: changed,
			Source: c.Source, Reason: c.Reason, OccurredAt: c.OccurredAt.UTC(),
		})
		if err != nil {
			return Record{}, Record{}, fmt.Errorf("encoding event of flight %d: %w", c.FLID, err)
		}
		msg = Record{Key: c.key(), Value: appendDocTail(head, docJSON, timesJSON), Headers: c.headers(topicMsg, true)}
	}
	if wantSchd {
		if c.EventType == EventDeleted {
			schd = Record{Key: c.key(), Headers: c.headers(topicSchd, false)}
		} else {
			head, err := json.Marshal(stateHead{
				SchemaVersion: SchemaVersion, EventID: id, EventType: c.EventType,
				FLID: c.FLID, StateVersion: c.StateVersion, OperationDay: c.OperationDay,
				Source: c.Source, OccurredAt: c.OccurredAt.UTC(),
			})
			if err != nil {
				return Record{}, Record{}, fmt.Errorf("encoding state of flight %d: %w", c.FLID, err)
			}
			schd = Record{Key: c.key(), Value: appendDocTail(head, docJSON, timesJSON), Headers: c.headers(topicSchd, true)}
		}
	}
	return msg, schd, nil
}

// appendDocTail closes the encoded head object (never empty: it has a
// schema_version) with the fields "flight" and "times", as encoding Event
// or State whole would.
func appendDocTail(head, doc, times []byte) []byte {
	out := make([]byte, 0, len(head)+len(doc)+len(times)+len(`,"flight":,"times":}`))
	out = append(out, head[:len(head)-1]...)
	out = append(out, `,"flight":`...)
	out = append(out, doc...)
	out = append(out, `,"times":`...)
	out = append(out, times...)
	return append(out, '}')
}

// check refuses a change the schemas would refuse, so a bug in a writer
// fails its transaction instead of reaching consumers.
func (c Change) check() error {
	switch c.EventType {
	case EventCreated, EventUpdated:
		if c.Flight == nil {
			return fmt.Errorf("encoding %s of flight %d: no document: %w", c.EventType, c.FLID, ErrChange)
		}
	case EventDeleted:
		if c.Flight != nil {
			return fmt.Errorf("encoding %s of flight %d: a deletion carries no document: %w", c.EventType, c.FLID, ErrChange)
		}
	default:
		return fmt.Errorf("encoding change of flight %d: %q: %w", c.FLID, c.EventType, ErrEventType)
	}
	if c.FLID < 1 || c.StateVersion < 1 {
		return fmt.Errorf("encoding %s of flight %d version %d: FLID and version start at 1: %w", c.EventType, c.FLID, c.StateVersion, ErrChange)
	}
	return nil
}

func (c Change) key() string { return strconv.FormatInt(c.FLID, 10) }

// headers returns the record headers of c on topic t, the CloudEvents
// attributes included; withValue adds the content type and the data
// schema, which a tombstone does not have.
func (c Change) headers(t topic, withValue bool) map[string]string {
	id := EventID(c.FLID, c.StateVersion)
	h := map[string]string{
		HeaderEventID:       id,
		HeaderEventType:     c.EventType,
		HeaderSchemaVersion: strconv.Itoa(SchemaVersion),
		HeaderStateVersion:  strconv.FormatInt(c.StateVersion, 10),
		HeaderCESpecVersion: CloudEventsSpecVersion,
		HeaderCEID:          id,
		HeaderCESource:      t.source,
		HeaderCEType:        CloudEventType(c.EventType),
		HeaderCETime:        c.OccurredAt.UTC().Format(time.RFC3339Nano),
		HeaderCESubject:     c.key(),
	}
	if withValue {
		h[HeaderContentType] = ContentTypeJSON
		h[HeaderCEDataSchema] = t.dataSchema
	}
	if c.Source != nil {
		h[HeaderMsgID] = strconv.FormatInt(c.Source.MsgID, 10)
	}
	c.Trace.addTo(h)
	return h
}
