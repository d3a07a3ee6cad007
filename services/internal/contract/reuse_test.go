package contract_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/internal/sis"
)

// sampleDocs are flight documents built from every element of every
// sample message (testdata/sis of the decoder), the rich document of the
// schema tests, and documents with what json.Marshal and Canonical encode
// differently or specially (HTML characters, U+2028/U+2029, non-ASCII,
// invalid UTF-8, empty lists and objects).
func sampleDocs(t *testing.T) map[string]flight.Doc {
	t.Helper()
	docs := map[string]flight.Doc{
		"rich":       richDoc(),
		"html":       {"FLID": "9", "REMK": `<b>gate & "stand"</b> > 3`, "ROUT": []any{map[string]any{"APCD": "A&B", "@X": "<>"}}},
		"separators": {"FLID": "9", "REMK": "line\u2028para\u2029end", "RESN": "tab\tnl\nquote\"back\\"},
		"unicode":    {"FLID": "9", "REMK": "航班 延误 ✈ é", "BAD": "a\xffb"},
		"empty":      {"FLID": "9", "LIST": []any{}, "OBJ": map[string]any{}},
	}
	files, err := filepath.Glob(filepath.Join("..", "sis", "testdata", "sis", "*.xml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "the sample messages of the decoder")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		m, err := sis.Decode(raw)
		if err != nil {
			continue // a malformed sample has no document
		}
		var walk func(prefix string, nodes []*sis.Node)
		walk = func(prefix string, nodes []*sis.Node) {
			for i, n := range nodes {
				name := prefix + "/" + n.Name + "#" + strings.Repeat("i", i%3)
				if obj, ok := flight.NodeValue(n).(map[string]any); ok {
					docs[name] = flight.Doc(obj)
				}
				walk(name, n.Children)
			}
		}
		walk(filepath.Base(f), m.Body())
	}
	return docs
}

// TestEncoder_R_J1_ReusedDocumentBytesEqualTheOldEncoding holds the
// payloads that embed the writer's canonical document bytes (msg, schd and
// flight-state values) to the encoding of the whole value that the
// processor did before, byte for byte, for every sample document, and
// checks the path without canonical bytes gives the same.
func TestEncoder_R_J1_ReusedDocumentBytesEqualTheOldEncoding(t *testing.T) {
	docs := sampleDocs(t)
	require.Greater(t, len(docs), 100)
	day := time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)
	enc := contract.Encoder{Zone: shanghai}
	for name, doc := range docs {
		times, err := contract.Times(doc, shanghai)
		require.NoError(t, err, name)
		for _, c := range []contract.Change{
			{FLID: 15, StateVersion: 2, EventType: contract.EventUpdated, OperationDay: "2021-01-23",
				Changed: []string{"STND"}, Source: src, OccurredAt: at, Flight: doc},
			{FLID: 16, StateVersion: 1, EventType: contract.EventCreated, Reason: "x<y",
				OccurredAt: at, Flight: doc},
		} {
			oldMsg, err := json.Marshal(contract.Event{SchemaVersion: contract.SchemaVersion,
				EventID: contract.EventID(c.FLID, c.StateVersion), EventType: c.EventType, FLID: c.FLID,
				StateVersion: c.StateVersion, OperationDay: c.OperationDay, Changed: c.Changed, Source: c.Source,
				Reason: c.Reason, OccurredAt: c.OccurredAt.UTC(), Flight: doc, Times: times})
			require.NoError(t, err)
			oldSchd, err := json.Marshal(contract.State{SchemaVersion: contract.SchemaVersion,
				EventID: contract.EventID(c.FLID, c.StateVersion), EventType: c.EventType, FLID: c.FLID,
				StateVersion: c.StateVersion, OperationDay: c.OperationDay, Source: c.Source,
				OccurredAt: c.OccurredAt.UTC(), Flight: doc, Times: times})
			require.NoError(t, err)
			if c.Changed == nil {
				oldMsg = []byte(strings.Replace(string(oldMsg), `"changed":null`, `"changed":[]`, 1))
			}
			for _, canonical := range [][]byte{doc.Canonical(), nil} {
				c.FlightJSON = canonical
				msg, schd, err := enc.Records(c)
				require.NoError(t, err, name)
				require.Equal(t, string(oldMsg), string(msg.Value), name)
				require.Equal(t, string(oldSchd), string(schd.Value), name)
				one, err := enc.Msg(c)
				require.NoError(t, err, name)
				require.Equal(t, msg, one, name)
				one, err = enc.Schd(c)
				require.NoError(t, err, name)
				require.Equal(t, schd, one, name)
			}
		}
		for _, opDay := range []*time.Time{&day, nil} {
			oldState := flightstate.Value{Schema: flightstate.Schema, FLID: 15, Version: 3, State: flightstate.StateActive, MsgID: 42, Doc: doc}
			if opDay != nil {
				oldState.OperationDay = opDay.Format(time.DateOnly)
			}
			want, err := json.Marshal(oldState)
			require.NoError(t, err)
			got, err := flightstate.EncodeCanonical(15, 3, flightstate.StateActive, opDay, 42, doc, doc.Canonical())
			require.NoError(t, err, name)
			require.Equal(t, string(want), string(got.Value), name)
			plain, err := flightstate.Encode(15, 3, flightstate.StateActive, opDay, 42, doc)
			require.NoError(t, err, name)
			require.Equal(t, got, plain, name)
		}
	}
}

// TestEncoder_R_J1_DeletionsKeepTheirShape holds the deletion records to
// the old encoding: a null flight, no times, a schd tombstone.
func TestEncoder_R_J1_DeletionsKeepTheirShape(t *testing.T) {
	c := changes()["DeletedBySweep"]
	want, err := json.Marshal(contract.Event{SchemaVersion: contract.SchemaVersion, EventID: contract.EventID(c.FLID, c.StateVersion),
		EventType: c.EventType, FLID: c.FLID, StateVersion: c.StateVersion, OperationDay: c.OperationDay,
		Changed: []string{}, Reason: c.Reason, OccurredAt: c.OccurredAt.UTC(), Times: map[string]string{}})
	require.NoError(t, err)
	msg, schd, err := contract.Encoder{}.Records(c)
	require.NoError(t, err)
	require.Equal(t, string(want), string(msg.Value))
	require.Nil(t, schd.Value)
	require.Equal(t, contract.EventDeleted, schd.Headers[contract.HeaderEventType])
}

// TestStringMapJSON_R_J1_EqualsJSONMarshal holds the header and times
// encoding to json.Marshal's bytes: the headers of every kind of change,
// the times of every sample document, and strings json.Marshal escapes.
func TestStringMapJSON_R_J1_EqualsJSONMarshal(t *testing.T) {
	maps := []map[string]string{nil, {}, {"": ""},
		{"k": `<a href="x">&amp;</a>`, "ctl\x00\x01\x1f\x7f": "tab\tnl\nbs\bff\f", "bad\xff": "\u2028\u2029", "é": "航班", `back\slash`: `"q"`},
		{"a<b": "x>y", "amp": "r&d", "del": "\x7f", "nul": "\x00", "quote": `"`, "bs": `\`, "high": "\x80"}}
	for _, c := range changes() {
		msg, schd, err := contract.Encoder{Zone: shanghai}.Records(c)
		require.NoError(t, err)
		maps = append(maps, msg.Headers, schd.Headers)
	}
	for _, doc := range sampleDocs(t) {
		times, err := contract.Times(doc, shanghai)
		require.NoError(t, err)
		maps = append(maps, times)
	}
	for _, m := range maps {
		want, err := json.Marshal(m)
		require.NoError(t, err)
		require.Equal(t, string(want), string(contract.StringMapJSON(m)))
	}
}
