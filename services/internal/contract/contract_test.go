package contract_test

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/contract/contracttest"
	"msgexchange/services/internal/flight"
)

var (
	shanghai = mustZone("Asia/Shanghai")
	at       = time.Date(2026, 11, 30, 6, 23, 20, 123456789, time.UTC)
	src      = &contract.Source{MsgID: 42, Type: "FLOP", Subtype: "STND", Sender: "AODB", Seqn: "1243"}
)

func mustZone(name string) *time.Location {
	z, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return z
}

// richDoc is a flight document with a SIS time in every place the
// catalogue puts one: top-level elements, list entries, an attribute, the
// character data of an element with attributes and the VERBATIM part; and
// values that must not be read as times (free text, a day that does not
// exist, a lower-case month, a season HHMM).
func richDoc() flight.Doc {
	return flight.Doc{
		"FLID": "15", "ALCD": "YG", "FLNO": "YG9015", "MVIN": "A", "SODT": "23JAN210535",
		"FLTY": "W", "FLIN": "D", "ACFT": "733", "RUNSTATE": "SCHEDULED",
		"ESTT": "23JAN210540", "CNCL": "23JAN210600", "COBT": "23JAN212359",
		"ROUT":  []any{map[string]any{"@RTNO": "1", "APCD": "XIY", "SCAT": "23JAN210710"}},
		"GTDT":  []any{map[string]any{"@GTNO": "1", "GTCD": "G1", "PGOT": "23JAN210400", "PGCT": "23JAN210500"}, map[string]any{"@GTNO": "2", "GTCD": "G2", "GOTM": "23JAN210410"}},
		"DELY":  []any{map[string]any{"@CODE": "93", "@STRT": "23JAN210520", "@DURA": "0030", "#text": "late inbound 23JAN210535"}},
		"REMC":  "23JAN210535",
		"EXSR":  "24JAN210100",
		"ABTM":  []any{map[string]any{"@ASNO": "1", "AOTM": "31FEB210100"}},
		"TIPT":  []any{map[string]any{"TRST": "504", "TRTM": "23jan210530"}},
		"PSHT":  []any{map[string]any{"@PSHN": "1", "PSTM": "1023"}},
		"XTIM":  map[string]any{"@KIND": "X", "#text": "23JAN210800"},
		"A/B~C": "23JAN210900",
		"VERBATIM": map[string]any{
			"FFID": "YG-YG9015-A-23JAN210535-D",
			"FLOP": map[string]any{"STND": map[string]any{"EXTR": "23JAN211000"}},
		},
	}
}

// richTimes is what Times must return for richDoc in Asia/Shanghai.
var richTimes = map[string]string{
	"/SODT":                    "2021-01-23T05:35:00+08:00",
	"/ESTT":                    "2021-01-23T05:40:00+08:00",
	"/CNCL":                    "2021-01-23T06:00:00+08:00",
	"/COBT":                    "2021-01-23T23:59:00+08:00",
	"/ROUT/0/SCAT":             "2021-01-23T07:10:00+08:00",
	"/GTDT/0/PGOT":             "2021-01-23T04:00:00+08:00",
	"/GTDT/0/PGCT":             "2021-01-23T05:00:00+08:00",
	"/GTDT/1/GOTM":             "2021-01-23T04:10:00+08:00",
	"/DELY/0/@STRT":            "2021-01-23T05:20:00+08:00",
	"/XTIM/#text":              "2021-01-23T08:00:00+08:00",
	"/A~1B~0C":                 "2021-01-23T09:00:00+08:00",
	"/VERBATIM/FLOP/STND/EXTR": "2021-01-23T10:00:00+08:00",
}

func checker(t *testing.T) *contracttest.Checker {
	t.Helper()
	c, err := contracttest.Load()
	require.NoError(t, err)
	return c
}

// closed compiles the schemas with additionalProperties false on the
// values and on source, so a field the encoder writes and the schema does
// not describe fails validation.
func closed(t *testing.T) *contracttest.Checker {
	t.Helper()
	dir, err := contracttest.Dir()
	require.NoError(t, err)
	c, err := contracttest.Compile(dir, func(file string, doc map[string]any) {
		if file == contracttest.HeadersFile {
			return
		}
		doc["additionalProperties"] = false
		doc["$defs"].(map[string]any)["source"].(map[string]any)["additionalProperties"] = false
	})
	require.NoError(t, err)
	return c
}

// changes are one change of every kind the writers produce.
func changes() map[string]contract.Change {
	return map[string]contract.Change{
		"Created": {FLID: 15, StateVersion: 1, EventType: contract.EventCreated, OperationDay: "2021-01-23",
			Changed: []string{"ACFT", "ALCD", "FLID"}, Source: src, OccurredAt: at, Flight: richDoc()},
		"Updated": {FLID: 15, StateVersion: 2, EventType: contract.EventUpdated, OperationDay: "2021-01-23",
			Changed: []string{"STND"}, Source: src, OccurredAt: at, Flight: richDoc(),
			Trace: contract.Trace{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "congo=t61rcWkgMzE"}},
		"UpdatedNoOperationDay": {FLID: 16, StateVersion: 7, EventType: contract.EventUpdated,
			Changed: []string{}, Source: src, OccurredAt: at, Flight: flight.Doc{"FLID": "16", "ALCD": "YG", "FLNO": "YG9016", "MVIN": "D", "SODT": "01MAR240000", "FLTY": "W", "FLIN": "I", "ACFT": "320", "RUNSTATE": "SCHEDULED"}},
		"DeletedByMessage": {FLID: 15, StateVersion: 3, EventType: contract.EventDeleted, OperationDay: "2021-01-23",
			Changed: []string{}, Source: &contract.Source{MsgID: 43, Type: "FLOP", Subtype: "FDEL", Sender: "AODB", Seqn: "1244"}, OccurredAt: at},
		"DeletedBySweep": {FLID: 15, StateVersion: 4, EventType: contract.EventDeleted, OperationDay: "2021-01-23",
			Changed: []string{}, Reason: "history-sweep", OccurredAt: at},
	}
}

// TestEncoder_R_I3_EveryEventValidatesAgainstTheSchemas encodes every kind
// of change for both topics and holds each record to the published schemas
// (open, as consumers get them, and closed) and the record rules.
func TestEncoder_R_I3_EveryEventValidatesAgainstTheSchemas(t *testing.T) {
	open, strict := checker(t), closed(t)
	enc := contract.Encoder{Zone: shanghai}
	for name, c := range changes() {
		t.Run(name, func(t *testing.T) {
			m, err := enc.Msg(c)
			require.NoError(t, err)
			s, err := enc.Schd(c)
			require.NoError(t, err)
			for _, chk := range []*contracttest.Checker{open, strict} {
				require.NoError(t, chk.CheckMsg(m.Key, m.Value, m.Headers))
				require.NoError(t, chk.CheckSchd(s.Key, s.Value, s.Headers))
			}
			require.Equal(t, strconv.FormatInt(c.FLID, 10), m.Key, "the key is the FLID")
			require.Equal(t, m.Key, s.Key)
			if c.EventType == contract.EventDeleted {
				require.Nil(t, s.Value, "a deletion is a schd tombstone")
				require.NotContains(t, s.Headers, contract.HeaderContentType)
			}
		})
	}
}

// TestEncoder_R_I3_DocumentedValues pins the encoded msg event, schd state
// and headers field by field, as docs/consumer-contract.md shows them.
func TestEncoder_R_I3_DocumentedValues(t *testing.T) {
	enc := contract.Encoder{Zone: shanghai}
	doc := flight.Doc{"FLID": "15", "ALCD": "YG", "FLNO": "YG9015", "MVIN": "A", "SODT": "23JAN210535", "FLTY": "W",
		"FLIN": "D", "ACFT": "733", "STND": "S1", "RUNSTATE": "SCHEDULED"}
	c := contract.Change{FLID: 15, StateVersion: 3, EventType: contract.EventUpdated, OperationDay: "2021-01-23",
		Changed: []string{"STND"}, Source: src, OccurredAt: at.In(shanghai), Flight: doc}
	m, err := enc.Msg(c)
	require.NoError(t, err)
	flightJSON := `{"FLID":"15","ALCD":"YG","FLNO":"YG9015","MVIN":"A","SODT":"23JAN210535","FLTY":"W","FLIN":"D","ACFT":"733","STND":"S1","RUNSTATE":"SCHEDULED"}`
	require.JSONEq(t, `{"schema_version":2,"event_id":"flight-15-v3","event_type":"FLIGHT_UPDATED","flid":15,"state_version":3,
		"operation_day":"2021-01-23","changed":["STND"],
		"source":{"msg_id":42,"type":"FLOP","subtype":"STND","sender":"AODB","seqn":"1243"},
		"occurred_at":"2026-11-30T06:23:20.123456789Z","flight":`+flightJSON+`,
		"times":{"/SODT":"2021-01-23T05:35:00+08:00"}}`, string(m.Value))
	ce := map[string]string{
		"ce_specversion": "1.0", "ce_id": "flight-15-v3", "ce_type": "msgexchange.flight.updated",
		"ce_time": "2026-11-30T06:23:20.123456789Z", "ce_subject": "15",
	}
	require.Equal(t, withHeaders(ce, map[string]string{
		"msgx-event-id": "flight-15-v3", "msgx-event-type": "FLIGHT_UPDATED", "msgx-schema-version": "2",
		"msgx-state-version": "3", "msgx-msg-id": "42", "content-type": "application/json",
		"ce_source": "/msgexchange/flight-events", "ce_dataschema": "urn:msgexchange:schema:msg:v2",
	}), m.Headers)
	require.Equal(t, "15", m.Key)

	s, err := enc.Schd(c)
	require.NoError(t, err)
	require.JSONEq(t, `{"schema_version":2,"event_id":"flight-15-v3","event_type":"FLIGHT_UPDATED","flid":15,"state_version":3,
		"operation_day":"2021-01-23","source":{"msg_id":42,"type":"FLOP","subtype":"STND","sender":"AODB","seqn":"1243"},
		"occurred_at":"2026-11-30T06:23:20.123456789Z","flight":`+flightJSON+`,
		"times":{"/SODT":"2021-01-23T05:35:00+08:00"}}`, string(s.Value))
	require.Equal(t, withHeaders(m.Headers, map[string]string{
		"ce_source": "/msgexchange/flight-states", "ce_dataschema": "urn:msgexchange:schema:schd:v2",
	}), s.Headers, "schd: the same headers, its own CloudEvents source and data schema")

	sweep := changes()["DeletedBySweep"]
	m, err = enc.Msg(sweep)
	require.NoError(t, err)
	require.JSONEq(t, `{"schema_version":2,"event_id":"flight-15-v4","event_type":"FLIGHT_DELETED","flid":15,"state_version":4,
		"operation_day":"2021-01-23","changed":[],"reason":"history-sweep","occurred_at":"2026-11-30T06:23:20.123456789Z",
		"flight":null,"times":{}}`, string(m.Value))
	s, err = enc.Schd(sweep)
	require.NoError(t, err)
	require.Nil(t, s.Value)
	require.Equal(t, map[string]string{"msgx-event-id": "flight-15-v4", "msgx-event-type": "FLIGHT_DELETED",
		"msgx-schema-version": "2", "msgx-state-version": "4",
		"ce_specversion": "1.0", "ce_id": "flight-15-v4", "ce_source": "/msgexchange/flight-states",
		"ce_type": "msgexchange.flight.deleted", "ce_time": "2026-11-30T06:23:20.123456789Z", "ce_subject": "15",
	}, s.Headers, "a tombstone: no content type, no data schema, no message")
}

// withHeaders returns a copy of base with more set.
func withHeaders(base, more map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, more)
	return out
}

// TestSchemas_R_I3_GoTypesAndSchemasNameTheSameFields fails when a field
// is added to, removed from or renamed in the Go types or the schemas
// without the other: the JSON names of Event, State and Source are exactly
// the schema's properties, and a field is required in the schema exactly
// when the Go type always writes it (no omitempty).
func TestSchemas_R_I3_GoTypesAndSchemasNameTheSameFields(t *testing.T) {
	dir, err := contracttest.Dir()
	require.NoError(t, err)
	for _, tc := range []struct {
		file string
		typ  reflect.Type
	}{
		{contracttest.MsgFile, reflect.TypeFor[contract.Event]()},
		{contracttest.SchdFile, reflect.TypeFor[contract.State]()},
	} {
		doc, err := contracttest.ReadSchema(filepath.Join(dir, tc.file))
		require.NoError(t, err)
		props, required := schemaFields(doc)
		fields, always := jsonFields(tc.typ)
		require.Equal(t, fields, props, "%s: Go fields of %s vs schema properties", tc.file, tc.typ)
		require.Equal(t, always, required, "%s: Go fields without omitempty vs schema required", tc.file)

		source := doc["$defs"].(map[string]any)["source"].(map[string]any)
		props, required = schemaFields(source)
		fields, always = jsonFields(reflect.TypeFor[contract.Source]())
		require.Equal(t, fields, props, "%s: Source", tc.file)
		require.Equal(t, always, required, "%s: Source required", tc.file)
	}
}

// TestSchemas_R_I3_OneVocabularyForBothTopics: a field both topics carry
// has the same name and the same definition on both, and the headers
// schema describes the headers the encoder writes.
func TestSchemas_R_I3_OneVocabularyForBothTopics(t *testing.T) {
	dir, err := contracttest.Dir()
	require.NoError(t, err)
	msg, err := contracttest.ReadSchema(filepath.Join(dir, contracttest.MsgFile))
	require.NoError(t, err)
	schd, err := contracttest.ReadSchema(filepath.Join(dir, contracttest.SchdFile))
	require.NoError(t, err)
	hdr, err := contracttest.ReadSchema(filepath.Join(dir, contracttest.HeadersFile))
	require.NoError(t, err)

	require.Equal(t, msg["$defs"], schd["$defs"], "the shared definitions are the same in both schemas")
	msgProps := msg["properties"].(map[string]any)
	for name, def := range schd["properties"].(map[string]any) {
		require.Contains(t, msgProps, name, "schd field %s is a msg field too", name)
		if name != "event_type" && name != "flight" { // schd narrows both: no deletions
			require.Equal(t, withoutDescriptions(msgProps[name]), withoutDescriptions(def), "field %s is defined alike on both topics", name)
		}
	}
	require.Equal(t, msg["$defs"].(map[string]any)["event_id"], hdr["$defs"].(map[string]any)["event_id"])

	hdrProps := slices.Sorted(maps.Keys(hdr["properties"].(map[string]any)))
	require.Equal(t, []string{
		contract.HeaderCEDataSchema, contract.HeaderCEID, contract.HeaderCESource, contract.HeaderCESpecVersion,
		contract.HeaderCESubject, contract.HeaderCETime, contract.HeaderCEType,
		contract.HeaderContentType, contract.HeaderEventID, contract.HeaderEventType, contract.HeaderMsgID,
		contract.HeaderSchemaVersion, contract.HeaderStateVersion, contract.HeaderTraceparent, contract.HeaderTracestate,
	}, hdrProps)
}

// TestSchemas_R_I3_RefuseWhatBreaksTheContract proves the schemas and
// record rules assert something: each broken record is refused.
func TestSchemas_R_I3_RefuseWhatBreaksTheContract(t *testing.T) {
	c := checker(t)
	enc := contract.Encoder{Zone: shanghai}
	good, err := enc.Msg(changes()["Updated"])
	require.NoError(t, err)
	goodSchd, err := enc.Schd(changes()["Updated"])
	require.NoError(t, err)
	del, err := enc.Msg(changes()["DeletedByMessage"])
	require.NoError(t, err)

	edit := func(raw []byte, f func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	msgCases := map[string][]byte{
		"SchemaVersion1":         edit(good.Value, func(m map[string]any) { m["schema_version"] = 1 }),
		"NoFLID":                 edit(good.Value, func(m map[string]any) { delete(m, "flid") }),
		"UnknownEventType":       edit(good.Value, func(m map[string]any) { m["event_type"] = "FLIGHT_MOVED" }),
		"UpdateWithoutFlight":    edit(good.Value, func(m map[string]any) { m["flight"] = nil }),
		"UpdateWithReason":       edit(good.Value, func(m map[string]any) { m["reason"] = "history-sweep" }),
		"NeitherSourceNorReason": edit(del.Value, func(m map[string]any) { delete(m, "source") }),
		"DeletionWithFlight":     edit(del.Value, func(m map[string]any) { m["flight"] = map[string]any(richDoc()) }),
		"LocalTimeWithoutOffset": edit(good.Value, func(m map[string]any) {
			m["times"].(map[string]any)["/SODT"] = "2021-01-23T05:35:00"
		}),
		"TimeNotThePointedValue": edit(good.Value, func(m map[string]any) {
			m["times"].(map[string]any)["/SODT"] = "2021-01-23T05:36:00+08:00"
		}),
		"TimeInAnotherZone": edit(good.Value, func(m map[string]any) {
			m["times"].(map[string]any)["/SODT"] = "2021-01-23T05:35:00Z"
		}),
		"TimeMissing":         edit(good.Value, func(m map[string]any) { delete(m["times"].(map[string]any), "/ESTT") }),
		"TimePointsNowhere":   edit(good.Value, func(m map[string]any) { m["times"].(map[string]any)["/NOPE"] = "2021-01-23T05:35:00+08:00" }),
		"OccurredAtNotUTC":    edit(good.Value, func(m map[string]any) { m["occurred_at"] = "2026-11-30T14:23:20+08:00" }),
		"SODTNotSIS":          edit(good.Value, func(m map[string]any) { m["flight"].(map[string]any)["SODT"] = "2021-01-23 05:35" }),
		"FlightWithoutACFT":   edit(good.Value, func(m map[string]any) { delete(m["flight"].(map[string]any), "ACFT") }),
		"FlightValueANumber":  edit(good.Value, func(m map[string]any) { m["flight"].(map[string]any)["MAXP"] = 300 }),
		"EventIDOfAnotherOne": edit(good.Value, func(m map[string]any) { m["event_id"] = "flight-15-v9" }),
	}
	inZone := c.InZone(shanghai)
	require.NoError(t, inZone.CheckMsg(good.Key, good.Value, good.Headers))
	for name, v := range msgCases {
		t.Run("Msg"+name, func(t *testing.T) {
			err := inZone.CheckMsg(good.Key, v, good.Headers)
			require.ErrorIs(t, err, contracttest.ErrContract)
		})
	}
	v1Schd := []byte(`{"schema":1,"flid":15,"version":2,"state":"ACTIVE","operation_day":"2021-01-23","msg_id":42,"doc":{}}`)
	require.ErrorIs(t, c.CheckSchd(goodSchd.Key, v1Schd, goodSchd.Headers), contracttest.ErrContract, "a schema-1 schd value")
	deletedSchd := edit(goodSchd.Value, func(m map[string]any) { m["event_type"] = contract.EventDeleted })
	require.ErrorIs(t, c.CheckSchd(goodSchd.Key, deletedSchd, goodSchd.Headers), contracttest.ErrContract, "a deletion is a tombstone on schd")
	require.ErrorIs(t, c.CheckMsg(good.Key, nil, good.Headers), contracttest.ErrContract, "msg has no tombstones")

	headerCases := map[string]func(h map[string]string){
		"NoEventID":         func(h map[string]string) { delete(h, contract.HeaderEventID) },
		"OtherEventID":      func(h map[string]string) { h[contract.HeaderEventID] = "flight-15-v1" },
		"SchemaVersion1":    func(h map[string]string) { h[contract.HeaderSchemaVersion] = "1" },
		"NoContentType":     func(h map[string]string) { delete(h, contract.HeaderContentType) },
		"OtherStateVersion": func(h map[string]string) { h[contract.HeaderStateVersion] = "9" },
		"OtherMsgID":        func(h map[string]string) { h[contract.HeaderMsgID] = "7" },
		"BadTraceparent":    func(h map[string]string) { h[contract.HeaderTraceparent] = "not-a-trace" },
		"TracestateAlone":   func(h map[string]string) { delete(h, contract.HeaderTraceparent) },
		"NoCloudEventID":    func(h map[string]string) { delete(h, contract.HeaderCEID) },
		"OtherCloudEventID": func(h map[string]string) { h[contract.HeaderCEID] = "flight-15-v1" },
		"SchdSource":        func(h map[string]string) { h[contract.HeaderCESource] = contract.SourceSchd },
		"OtherSubject":      func(h map[string]string) { h[contract.HeaderCESubject] = "16" },
		"OtherType":         func(h map[string]string) { h[contract.HeaderCEType] = contract.CloudEventType(contract.EventCreated) },
		"TimeNotOccurredAt": func(h map[string]string) { h[contract.HeaderCETime] = "2026-11-30T06:23:21Z" },
		"NoSpecVersion":     func(h map[string]string) { delete(h, contract.HeaderCESpecVersion) },
		"OtherKey":          nil,
	}
	for name, f := range headerCases {
		t.Run("Headers"+name, func(t *testing.T) {
			h := maps.Clone(good.Headers)
			key := good.Key
			if f == nil {
				key = "16"
			} else {
				f(h)
			}
			require.ErrorIs(t, c.CheckMsg(key, good.Value, h), contracttest.ErrContract)
		})
	}
	tomb, err := enc.Schd(changes()["DeletedByMessage"])
	require.NoError(t, err)
	withType := maps.Clone(tomb.Headers)
	withType[contract.HeaderContentType] = contract.ContentTypeJSON
	require.ErrorIs(t, c.CheckSchd(tomb.Key, nil, withType), contracttest.ErrContract, "a tombstone has no content")
	updatedTomb := maps.Clone(tomb.Headers)
	updatedTomb[contract.HeaderEventType] = contract.EventUpdated
	require.ErrorIs(t, c.CheckSchd(tomb.Key, nil, updatedTomb), contracttest.ErrContract, "a tombstone is a deletion")
}

// TestTimes_R_I3_EverySISTimeHasItsISOForm: every SIS time of the document,
// wherever it sits, gets its ISO 8601 form under its JSON Pointer; free
// text and values that are no valid time do not; the document itself is
// not touched.
func TestTimes_R_I3_EverySISTimeHasItsISOForm(t *testing.T) {
	doc := richDoc()
	before := doc.Clone()
	got, err := contract.Times(doc, shanghai)
	require.NoError(t, err)
	require.Equal(t, richTimes, got)
	require.Equal(t, before, doc, "the SIS originals stay unchanged")

	empty, err := contract.Times(nil, nil)
	require.NoError(t, err)
	require.NotNil(t, empty)
	require.Empty(t, empty)
}

// TestTimes_R_I3_OffsetIsTheZonesAtThatTime: the offset is the one the zone
// has at that wall-clock time (summer and winter time differ).
func TestTimes_R_I3_OffsetIsTheZonesAtThatTime(t *testing.T) {
	berlin := mustZone("Europe/Berlin")
	got, err := contract.Times(flight.Doc{"SODT": "15JUL241200", "ESTT": "15JAN241200"}, berlin)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"/SODT": "2024-07-15T12:00:00+02:00", "/ESTT": "2024-01-15T12:00:00+01:00"}, got)

	got, err = contract.Times(flight.Doc{"SODT": "15JUL241200"}, time.UTC)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"/SODT": "2024-07-15T12:00:00Z"}, got)
}

// TestEncoder_R_I3_RefusesWhatTheSchemasWouldRefuse: a change outside the
// contract fails in the writer's transaction instead of reaching
// consumers.
func TestEncoder_R_I3_RefusesWhatTheSchemasWouldRefuse(t *testing.T) {
	base := changes()["Updated"]
	cases := map[string]struct {
		edit func(c *contract.Change)
		zone *time.Location
		want error
	}{
		"UnknownType":      {func(c *contract.Change) { c.EventType = "FLIGHT_MOVED" }, shanghai, contract.ErrEventType},
		"UpdateNoDoc":      {func(c *contract.Change) { c.Flight = nil }, shanghai, contract.ErrChange},
		"DeletionWithDoc":  {func(c *contract.Change) { c.EventType = contract.EventDeleted }, shanghai, contract.ErrChange},
		"VersionZero":      {func(c *contract.Change) { c.StateVersion = 0 }, shanghai, contract.ErrChange},
		"FLIDZero":         {func(c *contract.Change) { c.FLID = 0 }, shanghai, contract.ErrChange},
		"TimesWithoutZone": {func(*contract.Change) {}, nil, contract.ErrNoZone},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			enc := contract.Encoder{Zone: tc.zone}
			_, err := enc.Msg(c)
			require.ErrorIs(t, err, tc.want)
			_, err = enc.Schd(c)
			require.ErrorIs(t, err, tc.want)
		})
	}
	// A deletion has no times, so it needs no zone (the history sweep).
	_, err := contract.Encoder{}.Msg(changes()["DeletedBySweep"])
	require.NoError(t, err)
}

// TestTrace_R_I3_TraceContextCarriedWhenValid: a valid W3C traceparent
// (and its tracestate) becomes the record's trace headers on both topics;
// an invalid one, or a tracestate alone, is left out.
func TestTrace_R_I3_TraceContextCarriedWhenValid(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	enc := contract.Encoder{Zone: shanghai}
	c := changes()["Updated"]
	c.Trace = contract.Trace{Parent: parent, State: "congo=t61rcWkgMzE"}
	for _, f := range []func(contract.Change) (contract.Record, error){enc.Msg, enc.Schd} {
		r, err := f(c)
		require.NoError(t, err)
		require.Equal(t, parent, r.Headers[contract.HeaderTraceparent])
		require.Equal(t, "congo=t61rcWkgMzE", r.Headers[contract.HeaderTracestate])
	}
	del := changes()["DeletedByMessage"]
	del.Trace = contract.Trace{Parent: parent}
	r, err := enc.Schd(del)
	require.NoError(t, err)
	require.Equal(t, parent, r.Headers[contract.HeaderTraceparent], "a tombstone carries the trace too")

	future := "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"
	require.True(t, contract.Trace{Parent: future}.Valid(), "a later version is read as version 00")
	for name, p := range map[string]string{
		"Empty":          "",
		"VersionFF":      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"UpperCase":      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"ZeroTraceID":    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"ZeroParentID":   "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"Short":          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
		"Version00Extra": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
		"BadSeparator":   "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	} {
		c.Trace = contract.Trace{Parent: p, State: "congo=t61rcWkgMzE"}
		r, err := enc.Msg(c)
		require.NoError(t, err)
		require.NotContains(t, r.Headers, contract.HeaderTraceparent, name)
		require.NotContains(t, r.Headers, contract.HeaderTracestate, name)
	}
	c.Trace = contract.Trace{Parent: parent, State: "bad\nstate"}
	r, err = enc.Msg(c)
	require.NoError(t, err)
	require.Equal(t, parent, r.Headers[contract.HeaderTraceparent])
	require.NotContains(t, r.Headers, contract.HeaderTracestate, "a tracestate with control characters")
}

// TestEventID_R_I3_StablePerFlightVersion: the ID is a function of the
// FLID and version only, so a redelivery or a second encoding repeats it.
func TestEventID_R_I3_StablePerFlightVersion(t *testing.T) {
	require.Equal(t, "flight-15-v3", contract.EventID(15, 3))
	a, err := contract.Encoder{Zone: shanghai}.Msg(changes()["Updated"])
	require.NoError(t, err)
	c := changes()["Updated"]
	c.OccurredAt = at.Add(time.Hour)
	b, err := contract.Encoder{Zone: shanghai}.Msg(c)
	require.NoError(t, err)
	require.Equal(t, a.Headers[contract.HeaderEventID], b.Headers[contract.HeaderEventID])
}

// withoutDescriptions returns a schema without its description keywords,
// which may word a shared field for its topic.
func withoutDescriptions(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, c := range x {
			if k != "description" {
				out[k] = withoutDescriptions(c)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = withoutDescriptions(c)
		}
		return out
	}
	return v
}

// schemaFields returns an object schema's property names and required
// names, sorted.
func schemaFields(doc map[string]any) (props, required []string) {
	props = slices.Sorted(maps.Keys(doc["properties"].(map[string]any)))
	for _, r := range doc["required"].([]any) {
		required = append(required, r.(string))
	}
	slices.Sort(required)
	return props, required
}

// jsonFields returns the JSON names of a struct's fields and those written
// always (no omitempty), sorted.
func jsonFields(t reflect.Type) (all, always []string) {
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	slices.Sort(all)
	slices.Sort(always)
	return all, always
}
