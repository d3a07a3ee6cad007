package flightstate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"msgexchange/services/internal/flight"
)

// Schema is the schema number of the flight-state value.
const Schema = 1

// Flight states.
const (
	StateActive  = "ACTIVE"
	StateDeleted = "DELETED"
)

// Record headers.
const (
	// HeaderVersion carries the flight's version on every record; it is the
	// only version a tombstone has.
	HeaderVersion = "msgx-version"
	// HeaderMsgID is the mailbox message that caused the state (for a
	// rebuild record: the message that last wrote the flight).
	HeaderMsgID = "msgx-msg-id"
	// HeaderRebuild marks a record republished by a projection rebuild; its
	// value is the rebuild's generation. The projector lets such a record
	// rewrite the version it already holds (a repair), never an older one.
	HeaderRebuild = "msgx-rebuild"
)

// Value is the value of a msgx.flight-state record (schema 1) of an ACTIVE
// flight; a deleted flight is a tombstone (null value) instead.
type Value struct {
	Schema       int        `json:"schema"`
	FLID         int64      `json:"flid"`
	Version      int64      `json:"version"`
	State        string     `json:"state"`
	OperationDay string     `json:"operation_day,omitempty"`
	MsgID        int64      `json:"msg_id"`
	Doc          flight.Doc `json:"doc"`
}

// Record is one encoded flight-state record: the value (nil for a
// tombstone) and the headers, both as the outbox stores them.
type Record struct {
	Value   []byte
	Headers map[string]string
}

// Encode returns the record of flight flid at version: for state ACTIVE the
// flight-state JSON of doc, for DELETED a tombstone. Both carry the headers
// msgx-version and msgx-msg-id (msgID). opDay may be nil (no operation day
// yet).
func Encode(flid, version int64, state string, opDay *time.Time, msgID int64, doc flight.Doc) (Record, error) {
	return EncodeCanonical(flid, version, state, opDay, msgID, doc, nil)
}

// valueHead is Value without Doc, its last field: the value is this head
// with "doc" appended, so a document's JSON can be reused.
type valueHead struct {
	Schema       int    `json:"schema"`
	FLID         int64  `json:"flid"`
	Version      int64  `json:"version"`
	State        string `json:"state"`
	OperationDay string `json:"operation_day,omitempty"`
	MsgID        int64  `json:"msg_id"`
}

// EncodeCanonical is Encode for a caller that holds doc's canonical JSON
// (flight.Doc.Canonical, nil if not): the value reuses those bytes instead
// of encoding doc again, and is byte for byte what Encode gives.
func EncodeCanonical(flid, version int64, state string, opDay *time.Time, msgID int64, doc flight.Doc, canonical []byte) (Record, error) {
	r := Record{Headers: map[string]string{
		HeaderVersion: strconv.FormatInt(version, 10),
		HeaderMsgID:   strconv.FormatInt(msgID, 10),
	}}
	switch state {
	case StateDeleted:
		return r, nil
	case StateActive:
	default:
		return Record{}, fmt.Errorf("encoding flight %d: unknown state %q (want %s or %s)", flid, state, StateActive, StateDeleted)
	}
	day := ""
	if opDay != nil {
		day = opDay.Format(time.DateOnly)
	}
	head, err := json.Marshal(valueHead{Schema: Schema, FLID: flid, Version: version, State: state, OperationDay: day, MsgID: msgID})
	if err != nil {
		return Record{}, fmt.Errorf("encoding flight %d: %w", flid, err)
	}
	docJSON, err := flight.JSON(doc, canonical)
	if err != nil {
		return Record{}, fmt.Errorf("encoding flight %d: %w", flid, err)
	}
	v := make([]byte, 0, len(head)+len(docJSON)+len(`,"doc":}`))
	v = append(v, head[:len(head)-1]...)
	v = append(v, `,"doc":`...)
	v = append(v, docJSON...)
	r.Value = append(v, '}')
	return r, nil
}
