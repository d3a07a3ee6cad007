package consumer

import (
	"encoding/json"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/services/projector/internal/store"
)

// Header names of tombstones on msgx.flight-state.
const (
	headerVersion = "msgx-version"
	headerMsgID   = "msgx-msg-id"
	// headerRebuild marks a record of a projection rebuild (R-E4), which
	// may repair the version Redis already holds.
	headerRebuild = "msgx-rebuild"
)

// flightState is the part of a msgx.flight-state value the projector reads;
// the value itself is stored verbatim.
type flightState struct {
	FLID    *int64 `json:"flid"`
	Version *int64 `json:"version"`
	MsgID   int64  `json:"msg_id"`
}

// decoded is one record turned into a projection update.
type decoded struct {
	update store.Update
	msgID  int64 // 0 when unknown
	// span is the record's apply span (SpanApply), nil when the record
	// carries no trace context.
	span trace.Span
}

// decodeRecord reads a msgx.flight-state record: key = decimal FLID; value
// = flight-state JSON whose flid matches the key and whose version is set,
// or null (tombstone) with the version in the msgx-version header. A record
// with the msgx-rebuild header becomes a repairing update.
func decodeRecord(r *kgo.Record) (decoded, error) {
	d, err := decodeUpdate(r)
	if err == nil {
		_, d.update.Repair = header(r, headerRebuild)
	}
	return d, err
}

func decodeUpdate(r *kgo.Record) (decoded, error) {
	bad := func(reason string) (decoded, error) {
		return decoded{}, &RecordError{Partition: r.Partition, Offset: r.Offset, Reason: reason}
	}
	flid, err := strconv.ParseInt(string(r.Key), 10, 64)
	if err != nil || flid < 0 {
		return bad("key " + strconv.Quote(string(r.Key)) + " is not a decimal FLID")
	}
	if r.Value == nil {
		v, ok := header(r, headerVersion)
		if !ok {
			return bad("tombstone without " + headerVersion + " header")
		}
		version, err := strconv.ParseInt(v, 10, 64)
		if err != nil || version < 0 {
			return bad("tombstone header " + headerVersion + " " + strconv.Quote(v) + " is not a non-negative decimal")
		}
		var msgID int64
		if m, ok := header(r, headerMsgID); ok {
			msgID, _ = strconv.ParseInt(m, 10, 64)
		}
		return decoded{update: store.Update{FLID: flid, Version: version}, msgID: msgID}, nil
	}
	// json.Unmarshal validates the whole value, so only well-formed JSON is
	// ever stored and served.
	var fs flightState
	if err := json.Unmarshal(r.Value, &fs); err != nil {
		return bad("value is not a JSON object: " + err.Error())
	}
	if fs.FLID == nil || *fs.FLID != flid {
		return bad("value flid does not match key " + strconv.FormatInt(flid, 10))
	}
	if fs.Version == nil || *fs.Version < 0 {
		return bad("value has no non-negative version")
	}
	return decoded{update: store.Update{FLID: flid, Version: *fs.Version, Value: r.Value}, msgID: fs.MsgID}, nil
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// ack is the value of a msgx.projection-acks record: Redis holds version
// Version or newer of flight FLID (or its deletion at Version or newer).
type ack struct {
	FLID    int64 `json:"flid"`
	Version int64 `json:"version"`
}

// ackRecords builds one ack per FLID carrying the highest version of the
// batch, in first-seen order. An ack of (FLID, v) settles every pending
// projection of that FLID with a version <= v (R-B7), so one ack per FLID
// says everything the batch's acks would. The records, their keys and
// values share three allocations per batch rather than several per ack:
// at thousands of flight changes a second the acks are most of what the
// consumer allocates.
func ackRecords(topic string, updates []store.Update) []*kgo.Record {
	index := make(map[int64]int, len(updates))
	acks := make([]ack, 0, len(updates))
	for _, u := range updates {
		if i, ok := index[u.FLID]; ok {
			acks[i].Version = max(acks[i].Version, u.Version)
			continue
		}
		index[u.FLID] = len(acks)
		acks = append(acks, ack{FLID: u.FLID, Version: u.Version})
	}
	slab := make([]kgo.Record, len(acks))
	recs := make([]*kgo.Record, len(acks))
	// Key and value of an ack are at most 19 and 58 bytes (non-negative
	// int64s), so buf never grows; if it did, the slices taken so far would
	// still hold their bytes.
	buf := make([]byte, 0, len(acks)*80)
	for i, a := range acks {
		start := len(buf)
		buf = strconv.AppendInt(buf, a.FLID, 10)
		key := buf[start:len(buf):len(buf)]
		start = len(buf)
		buf = a.appendJSON(buf)
		slab[i] = kgo.Record{Topic: topic, Key: key, Value: buf[start:len(buf):len(buf)]}
		recs[i] = &slab[i]
	}
	return recs
}

// appendJSON appends the ack's JSON, as json.Marshal writes it.
func (a ack) appendJSON(b []byte) []byte {
	b = append(b, `{"flid":`...)
	b = strconv.AppendInt(b, a.FLID, 10)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, a.Version, 10)
	return append(b, '}')
}
