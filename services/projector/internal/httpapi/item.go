package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
)

// storedState is a stored flight-state value (schema 1, what the
// processor writes to msgx.flight-state and the projector keeps in
// Redis verbatim) as version 2 of the items reads it.
type storedState struct {
	FLID         int64           `json:"flid"`
	Version      int64           `json:"version"`
	OperationDay string          `json:"operation_day"`
	MsgID        int64           `json:"msg_id"`
	Doc          json.RawMessage `json:"doc"`
}

// appendItem appends the item of the stored value doc in version v. In
// version 1 that is the stored value itself, compact and HTML-escaped —
// byte for byte what encoding/json wrote for it when the list was built in
// memory. In version 2 it is the value in the consumer contract's names:
//
//	{"schema_version":2,"event_id":"flight-15-v3","flid":15,"state_version":3,
//	 "operation_day":"2021-01-23","source":{"msg_id":42},"flight":{…},"times":{…}}
//
// — the schd state of the same version (docs/consumer-contract.md) without
// what the projection does not keep: event_type, occurred_at and the
// source's META beyond msg_id. event_id names the change that produced
// this state, exactly as on msg and schd; source is absent when no message
// is known (msg_id 0); times maps every SIS time of the flight to ISO 8601
// in the airport's zone, as contract.Times does for Kafka. It fails when
// doc is not a flight-state JSON object.
func appendItem(buf *bytes.Buffer, doc []byte, v apiVersion, zone *time.Location) error {
	if v == apiV1 {
		return appendCompact(buf, doc)
	}
	var s storedState
	if err := json.Unmarshal(doc, &s); err != nil {
		return err
	}
	var times []byte
	if isNull(s.Doc) {
		s.Doc, times = json.RawMessage("null"), []byte("{}")
	} else {
		var fd flight.Doc
		if err := json.Unmarshal(s.Doc, &fd); err != nil {
			return fmt.Errorf("flight %d: doc: %w", s.FLID, err)
		}
		t, err := contract.Times(fd, zone)
		if err != nil {
			return fmt.Errorf("flight %d: %w", s.FLID, err)
		}
		times = contract.StringMapJSON(t)
	}
	b := buf.AvailableBuffer()
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, contract.SchemaVersion, 10)
	b = append(b, `,"event_id":"`...)
	b = append(b, contract.EventID(s.FLID, s.Version)...)
	b = append(b, `","flid":`...)
	b = strconv.AppendInt(b, s.FLID, 10)
	b = append(b, `,"state_version":`...)
	b = strconv.AppendInt(b, s.Version, 10)
	if s.OperationDay != "" {
		day, _ := json.Marshal(s.OperationDay) // a string always encodes
		b = append(b, `,"operation_day":`...)
		b = append(b, day...)
	}
	if s.MsgID > 0 {
		b = append(b, `,"source":{"msg_id":`...)
		b = strconv.AppendInt(b, s.MsgID, 10)
		b = append(b, '}')
	}
	b = append(b, `,"flight":`...)
	buf.Write(b)
	if err := appendCompact(buf, s.Doc); err != nil {
		return err
	}
	buf.WriteString(`,"times":`)
	buf.Write(times)
	buf.WriteByte('}')
	return nil
}

// appendCompact appends the compact, HTML-escaped form of a JSON value, as
// encoding/json writes a json.RawMessage; it fails when it is not JSON.
func appendCompact(buf *bytes.Buffer, doc []byte) error {
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return err
	}
	json.HTMLEscape(buf, compact.Bytes())
	return nil
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}
