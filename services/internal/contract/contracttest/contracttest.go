// Package contracttest checks records of the consumer topics msg and schd
// against the published contract: the JSON Schemas in docs/schemas (draft
// 2020-12, formats asserted) and the rules the schemas cannot express —
// the key is the FLID, the headers repeat the value's event ID, type and
// versions, a tombstone carries the headers without a content type, and
// every SIS time of the flight has its ISO 8601 form in times.
//
// Why a package: the contract's unit tests and the end-to-end tests must
// hold records to the same check, so a test that consumes msg or schd
// cannot accept a record a consumer's validator would refuse.
package contracttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
)

// Schema files in docs/schemas.
const (
	MsgFile     = "msg.v2.schema.json"
	SchdFile    = "schd.v2.schema.json"
	HeadersFile = "headers.v2.schema.json"
)

// ErrContract marks a record that breaks the contract.
var ErrContract = errors.New("record breaks the consumer contract")

// Checker validates records against the compiled schemas.
type Checker struct {
	msg, schd, headers *jsonschema.Schema
	// zone, when set, is the operation-day zone the records were encoded
	// in: each ISO time must then be exactly the SIS time read in it, not
	// only the same wall-clock time.
	zone *time.Location
}

// InZone returns a checker that also holds every ISO time to the offset of
// zone, the producer's operation-day.zone.
func (c *Checker) InZone(zone *time.Location) *Checker {
	cp := *c
	cp.zone = zone
	return &cp
}

var (
	loadOnce sync.Once
	loaded   *Checker
	loadErr  error
)

// Dir returns the directory of the published schemas: docs/schemas of the
// repository that contains the working directory (found by its go.work).
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the schemas: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return filepath.Join(d, "docs", "schemas"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("finding the schemas: no go.work above %s", wd)
		}
	}
}

// Load compiles the published schemas once per test binary.
func Load() (*Checker, error) {
	loadOnce.Do(func() {
		dir, err := Dir()
		if err != nil {
			loadErr = err
			return
		}
		loaded, loadErr = Compile(dir, nil)
	})
	return loaded, loadErr
}

// Compile compiles the schemas in dir. edit, when not nil, may change each
// schema document (parsed JSON) before it is compiled; the drift tests use
// it to close the schemas (additionalProperties false).
func Compile(dir string, edit func(file string, doc map[string]any)) (*Checker, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	var out [3]*jsonschema.Schema
	for i, name := range []string{MsgFile, SchdFile, HeadersFile} {
		doc, err := ReadSchema(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if edit != nil {
			edit(name, doc)
		}
		loc := "file:///schemas/" + name
		if err := c.AddResource(loc, doc); err != nil {
			return nil, fmt.Errorf("adding schema %s: %w", name, err)
		}
		if out[i], err = c.Compile(loc); err != nil {
			return nil, fmt.Errorf("compiling schema %s: %w", name, err)
		}
	}
	return &Checker{msg: out[0], schd: out[1], headers: out[2]}, nil
}

// ReadSchema reads one schema document as the validator sees it.
func ReadSchema(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("reading schema %s: %w", filepath.Base(path), err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("reading schema %s: not an object", filepath.Base(path))
	}
	return doc, nil
}

// ValidateValue validates value against the schema of topic kind "msg" or
// "schd" alone, without the record rules.
func (c *Checker) ValidateValue(kind string, value []byte) error {
	sch := c.msg
	if kind == "schd" {
		sch = c.schd
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return fmt.Errorf("%s value is not JSON: %w: %w", kind, err, ErrContract)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%s value: %w: %w", kind, err, ErrContract)
	}
	return nil
}

// ValidateHeaders validates a header set against the headers schema alone.
func (c *Checker) ValidateHeaders(headers map[string]string) error {
	inst := make(map[string]any, len(headers))
	for k, v := range headers {
		inst[k] = v
	}
	if err := c.headers.Validate(inst); err != nil {
		return fmt.Errorf("headers: %w: %w", err, ErrContract)
	}
	return nil
}

// CheckMsg checks one msg record.
func (c *Checker) CheckMsg(key string, value []byte, headers map[string]string) error {
	if value == nil {
		return fmt.Errorf("msg record %s: a msg record is never a tombstone: %w", key, ErrContract)
	}
	if err := c.ValidateValue("msg", value); err != nil {
		return fmt.Errorf("msg record %s: %w", key, err)
	}
	var ev contract.Event
	if err := json.Unmarshal(value, &ev); err != nil {
		return fmt.Errorf("msg record %s: decoding: %w", key, err)
	}
	if err := c.checkRecord(key, headers, true, ev.EventID, ev.EventType, ev.FLID, ev.StateVersion, ev.Source); err != nil {
		return fmt.Errorf("msg record %s: %w", key, err)
	}
	if err := checkCloudEvent(key, headers, contract.SourceMsg, contract.DataSchemaMsg, ev.OccurredAt); err != nil {
		return fmt.Errorf("msg record %s: %w", key, err)
	}
	if err := checkTimes(value, c.zone); err != nil {
		return fmt.Errorf("msg record %s: %w", key, err)
	}
	return nil
}

// CheckSchd checks one schd record; a nil value is a tombstone.
func (c *Checker) CheckSchd(key string, value []byte, headers map[string]string) error {
	if value == nil {
		if err := c.ValidateHeaders(headers); err != nil {
			return fmt.Errorf("schd tombstone %s: %w", key, err)
		}
		if headers[contract.HeaderEventType] != contract.EventDeleted {
			return fmt.Errorf("schd tombstone %s: %s %q, want %s: %w", key, contract.HeaderEventType, headers[contract.HeaderEventType], contract.EventDeleted, ErrContract)
		}
		if _, ok := headers[contract.HeaderContentType]; ok {
			return fmt.Errorf("schd tombstone %s: a tombstone has no content type: %w", key, ErrContract)
		}
		v, _ := strconv.ParseInt(headers[contract.HeaderStateVersion], 10, 64)
		if want := flightKeyID(key, v); headers[contract.HeaderEventID] != want {
			return fmt.Errorf("schd tombstone %s: %s %q, want %q: %w", key, contract.HeaderEventID, headers[contract.HeaderEventID], want, ErrContract)
		}
		if err := checkCloudEvent(key, headers, contract.SourceSchd, "", time.Time{}); err != nil {
			return fmt.Errorf("schd tombstone %s: %w", key, err)
		}
		return nil
	}
	if err := c.ValidateValue("schd", value); err != nil {
		return fmt.Errorf("schd record %s: %w", key, err)
	}
	var st contract.State
	if err := json.Unmarshal(value, &st); err != nil {
		return fmt.Errorf("schd record %s: decoding: %w", key, err)
	}
	if err := c.checkRecord(key, headers, true, st.EventID, st.EventType, st.FLID, st.StateVersion, st.Source); err != nil {
		return fmt.Errorf("schd record %s: %w", key, err)
	}
	if err := checkCloudEvent(key, headers, contract.SourceSchd, contract.DataSchemaSchd, st.OccurredAt); err != nil {
		return fmt.Errorf("schd record %s: %w", key, err)
	}
	if err := checkTimes(value, c.zone); err != nil {
		return fmt.Errorf("schd record %s: %w", key, err)
	}
	return nil
}

func flightKeyID(key string, version int64) string {
	flid, _ := strconv.ParseInt(key, 10, 64)
	return contract.EventID(flid, version)
}

// checkRecord holds the key and headers of a record with a value to the
// value's fields.
func (c *Checker) checkRecord(key string, headers map[string]string, withValue bool, eventID, eventType string, flid, version int64, src *contract.Source) error {
	if err := c.ValidateHeaders(headers); err != nil {
		return err
	}
	var problems []string
	want := map[string]string{
		contract.HeaderEventID:       eventID,
		contract.HeaderEventType:     eventType,
		contract.HeaderSchemaVersion: strconv.Itoa(contract.SchemaVersion),
		contract.HeaderStateVersion:  strconv.FormatInt(version, 10),
	}
	if withValue {
		want[contract.HeaderContentType] = contract.ContentTypeJSON
	}
	if src != nil {
		want[contract.HeaderMsgID] = strconv.FormatInt(src.MsgID, 10)
	} else if v, ok := headers[contract.HeaderMsgID]; ok {
		problems = append(problems, fmt.Sprintf("%s %q without a source", contract.HeaderMsgID, v))
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if headers[k] != want[k] {
			problems = append(problems, fmt.Sprintf("header %s %q, want %q", k, headers[k], want[k]))
		}
	}
	if key != strconv.FormatInt(flid, 10) {
		problems = append(problems, fmt.Sprintf("key %q is not the flid %d", key, flid))
	}
	if eventID != contract.EventID(flid, version) {
		problems = append(problems, fmt.Sprintf("event_id %q is not the one of flight %d v%d", eventID, flid, version))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %w", strings.Join(problems, "; "), ErrContract)
	}
	return nil
}

// checkCloudEvent holds the CloudEvents headers of a record (R-N8) to its
// msgx- headers and key: id the event ID, subject the FLID, type the event
// type's, source the topic's, time occurred_at (a tombstone's time is only
// required to be RFC 3339), and a data schema exactly when there is data
// (dataSchema "" for a tombstone).
func checkCloudEvent(key string, headers map[string]string, source, dataSchema string, occurredAt time.Time) error {
	want := map[string]string{
		contract.HeaderCESpecVersion: contract.CloudEventsSpecVersion,
		contract.HeaderCEID:          headers[contract.HeaderEventID],
		contract.HeaderCESource:      source,
		contract.HeaderCEType:        contract.CloudEventType(headers[contract.HeaderEventType]),
		contract.HeaderCESubject:     key,
		contract.HeaderCEDataSchema:  dataSchema,
	}
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got, ok := headers[k]; got != want[k] || ok != (want[k] != "") {
			problems = append(problems, fmt.Sprintf("header %s %q, want %q", k, got, want[k]))
		}
	}
	at, err := time.Parse(time.RFC3339Nano, headers[contract.HeaderCETime])
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("header %s %q: not RFC 3339", contract.HeaderCETime, headers[contract.HeaderCETime]))
	case !occurredAt.IsZero() && !at.Equal(occurredAt):
		problems = append(problems, fmt.Sprintf("header %s %q, want occurred_at %s", contract.HeaderCETime, headers[contract.HeaderCETime], occurredAt.Format(time.RFC3339Nano)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("CloudEvents: %s: %w", strings.Join(problems, "; "), ErrContract)
	}
	return nil
}

// checkTimes holds times to flight: the same set of JSON Pointers as the
// SIS times of the document, each ISO value the SIS wall-clock time (in
// zone, when it is known).
func checkTimes(value []byte, zone *time.Location) error {
	var v struct {
		Flight map[string]any    `json:"flight"`
		Times  map[string]string `json:"times"`
	}
	if err := json.Unmarshal(value, &v); err != nil {
		return fmt.Errorf("decoding times: %w", err)
	}
	sis, err := contract.Times(flight.Doc(v.Flight), time.UTC)
	if err != nil {
		return fmt.Errorf("reading SIS times: %w", err)
	}
	var problems []string
	for ptr := range sis {
		if _, ok := v.Times[ptr]; !ok {
			problems = append(problems, "SIS time "+ptr+" has no ISO form")
		}
	}
	for _, ptr := range slices.Sorted(maps.Keys(v.Times)) {
		iso := v.Times[ptr]
		raw, ok := resolve(v.Flight, ptr)
		if !ok {
			problems = append(problems, "times "+ptr+" points at nothing in flight")
			continue
		}
		t, err := time.Parse(time.RFC3339, iso)
		if err != nil {
			problems = append(problems, fmt.Sprintf("times %s %q: %v", ptr, iso, err))
			continue
		}
		if got := strings.ToUpper(t.Format("02Jan061504")); got != raw {
			problems = append(problems, fmt.Sprintf("times %s %q is %s in its own offset, the SIS value is %q", ptr, iso, got, raw))
			continue
		}
		if zone != nil {
			want, err := flight.ParseDateTime(raw, zone)
			if err == nil && want.Format(time.RFC3339) != iso {
				problems = append(problems, fmt.Sprintf("times %s %q, want %q in %s", ptr, iso, want.Format(time.RFC3339), zone))
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("%s: %w", strings.Join(problems, "; "), ErrContract)
	}
	return nil
}

// resolve returns the string at JSON Pointer ptr in doc.
func resolve(doc map[string]any, ptr string) (string, bool) {
	var cur any = doc
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = unescape.Replace(tok)
		switch x := cur.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return "", false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return "", false
			}
			cur = x[i]
		default:
			return "", false
		}
	}
	s, ok := cur.(string)
	return s, ok
}
