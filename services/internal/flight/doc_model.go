package flight

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"msgexchange/services/internal/sis"
)

// Doc is a flight document: element name → value (string, object or array).
type Doc map[string]any

// listElements are the repeated structures of a flight record; they are
// arrays even when a message carries one of them.
var listElements = map[string]bool{
	"ROUT": true, "ERUT": true, "PSDT": true, "GTDT": true, "CKDT": true,
	"CHDT": true, "CLDT": true, "CHOT": true, "ABTM": true, "DELY": true,
	"SRVT": true, "VIPF": true, "VIPT": true, "PORT": true, "TIPT": true,
	"PSHT": true,
}

// IsList reports whether name is a repeated structure.
func IsList(name string) bool { return listElements[name] }

// freeText are the elements whose character data is free text (remarks,
// descriptions, reasons, names, comments): kept exactly as sent, leading
// and trailing blanks included (catalogue §2.3). Every other element is a
// code, number or time and is trimmed. Text that is blank throughout is
// "no text" in both cases.
var freeText = map[string]bool{
	// flight records and FLOP payloads: remarks, reasons, delay comments
	"REMC": true, "EXSR": true, "SARR": true,
	"DELY": true, "FDIV": true, "FRET": true, "FLAB": true,
	// reference data: descriptions (English and Chinese), names, remarks
	"DESC": true, "CDSC": true, "ANRD": true, "ARDC": true,
	"ONAM": true, "ONMC": true, "NAME": true, "NAMC": true,
	"ANAM": true, "ANMC": true, "CNAM": true, "CNMC": true,
	"BTNM": true, "BNMC": true, "CHNM": true, "CTNM": true,
	"COUN": true, "DDES": true, "DDSC": true, "FDES": true, "FDSC": true,
	"GTNM": true, "GNMC": true, "HLTD": true, "HTDC": true,
	"PRNM": true, "PNMC": true, "REGN": true, "RGNC": true,
	"STNM": true, "SNMC": true, "STTD": true, "STDC": true,
	"TNAM": true, "TNMC": true, "VFNM": true, "VLNM": true,
	"VDES": true, "VDSC": true, "VPON": true, "VRMK": true,
	"VPWU": true, "VPPS": true, "VPTC": true, "VSDS": true, "VSDC": true,
}

// IsFreeText reports whether the character data of element name is kept as
// sent (free text) rather than trimmed (codes, numbers, times).
func IsFreeText(name string) bool { return freeText[name] }

// text returns the character data of n as stored: as sent for free text,
// trimmed otherwise, and "" when it is blank either way.
func text(n *sis.Node) string {
	v := n.Value()
	if v == "" || !freeText[n.Name] {
		return v
	}
	return n.Text
}

// nodeValue converts one element to its document value.
func nodeValue(n *sis.Node) any {
	if len(n.Attrs) == 0 && len(n.Children) == 0 {
		return text(n)
	}
	obj := map[string]any{}
	for _, a := range n.Attrs {
		obj["@"+a.Name] = a.Value
	}
	if t := text(n); t != "" {
		obj["#text"] = t
	}
	addChildren(obj, n.Children)
	return obj
}

// addChildren adds children to obj, repeated ones and known lists as arrays.
func addChildren(obj map[string]any, children []*sis.Node) {
	count := map[string]int{}
	for _, c := range children {
		count[c.Name]++
	}
	for _, c := range children {
		v := nodeValue(c)
		if listElements[c.Name] || count[c.Name] > 1 {
			arr, _ := obj[c.Name].([]any)
			obj[c.Name] = append(arr, v)
			continue
		}
		obj[c.Name] = v
	}
}

// Canonical returns the document's canonical JSON (sorted keys), used both
// for storage and for deciding whether anything changed.
func (d Doc) Canonical() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any(d)) // a Doc holds only strings, maps and slices
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// JSON returns what json.Marshal gives for d, inside the payloads that
// embed the document (msg, schd and flight-state values). canonical is
// d.Canonical() when the caller holds it, nil otherwise: then the
// document is not encoded again, only the three characters json.Marshal
// escapes for HTML and Canonical keeps (<, >, &) are escaped, so one
// encoding per change serves the stored row and its three payloads.
func JSON(d Doc, canonical []byte) ([]byte, error) {
	if d == nil {
		return []byte("null"), nil
	}
	if canonical == nil {
		b, err := json.Marshal(map[string]any(d))
		if err != nil {
			return nil, fmt.Errorf("encoding flight document: %w", err)
		}
		return b, nil
	}
	if !bytes.ContainsAny(canonical, "<>&") {
		return canonical, nil // Canonical already escapes U+2028 and U+2029 as Marshal does
	}
	var buf bytes.Buffer
	buf.Grow(len(canonical) + 16)
	json.HTMLEscape(&buf, canonical)
	return buf.Bytes(), nil
}

// Equal reports whether two documents are the same.
func Equal(a, b Doc) bool { return bytes.Equal(a.Canonical(), b.Canonical()) }

// Clone returns a deep copy. It copies strings, objects and lists
// directly, as they come out of a JSON round trip (objects as
// map[string]any, lists as []any); anything else takes that round trip.
// A copy costs a fraction of encoding and decoding the document, which
// the processor does several times per change.
func (d Doc) Clone() Doc {
	if d == nil {
		return nil
	}
	return Doc(cloneObject(d))
}

func cloneObject(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return x
	case map[string]any:
		if x == nil {
			return nil
		}
		return cloneObject(x)
	case Doc:
		if x == nil {
			return nil
		}
		return cloneObject(x)
	case []any:
		if x == nil {
			return nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cloning flight document: %v", err)) // a Doc holds only plain data
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("cloning flight document: %v", err)) // cannot happen: Marshal wrote valid JSON
	}
	return out
}

// String returns a top-level scalar field, "" when absent or not a string.
func (d Doc) String(name string) string {
	s, _ := d[name].(string)
	return s
}

// Int64 parses a top-level numeric field; ok is false when absent or empty.
func (d Doc) Int64(name string) (int64, bool) {
	s := d.String(name)
	if s == "" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// NodeValue returns the document value of one element (see the package
// documentation for the mapping).
func NodeValue(n *sis.Node) any { return nodeValue(n) }
