package board

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"msgexchange/services/projector/internal/store"
)

// sisTimeLayout is the SIS flight time DDMMMYYHHMM (23JAN210535). The values
// are airport wall-clock times; they are parsed in UTC only to be reformatted,
// never converted.
const sisTimeLayout = "02Jan061504"

// readableLayout is how the board shows a flight time (23 Jan 05:35).
const readableLayout = "02 Jan 15:04"

// Row is one flight as the board shows it: only the columns of the board,
// derived from the stored flight-state value.
type Row struct {
	// FLID identifies the flight; the browser keys its rows by it.
	FLID int64 `json:"flid"`
	// Version is the flight's state_version; a new one highlights the row.
	Version int64 `json:"version"`
	// FLNO is the flight number.
	FLNO string `json:"flno"`
	// MVIN is the movement: "A" arrival, "D" departure.
	MVIN string `json:"mvin"`
	// SODT is the raw scheduled time (DDMMMYYHHMM, airport time).
	SODT string `json:"sodt"`
	// Scheduled is SODT readable ("23 Jan 05:35"), or SODT itself when it
	// does not parse.
	Scheduled string `json:"scheduled"`
	// T is SODT as 2006-01-02T15:04 (airport time), the key the page sorts
	// by and compares with the window's now; "" when SODT does not parse.
	T string `json:"t"`
	// Route lists the stations of ERUT (the full routing) or, without it,
	// of ROUT, in RTNO order.
	Route []string `json:"route"`
	// Stand is STND.
	Stand string `json:"stand"`
	// Gate is the GATE of the first gate (lowest GTNO) of GTDT.
	Gate string `json:"gate"`
	// Status is the FTSS status code.
	Status string `json:"status"`
	// Flags are the irregularities set on the flight (CNCL, FDIV, FRET,
	// FLAB), in that order.
	Flags []Flag `json:"flags"`
	// Registration is RENO.
	Registration string `json:"registration"`
	// Aircraft is ACFT, the aircraft type.
	Aircraft string `json:"aircraft"`
	// Problem is set when the stored value could not be read; the row then
	// carries only FLID, so a damaged flight is shown, not hidden.
	Problem string `json:"problem,omitempty"`

	sortTime time.Time // parsed SODT; zero when it does not parse
}

// Flag is one irregularity of a flight: a short code for the board and a
// sentence for its tooltip.
type Flag struct {
	// Code is what the board shows: CNCL, "FDIV HKG", FRET or FLAB.
	Code string `json:"code"`
	// Text explains it ("Diverted to HKG: INCLEMENT WEATHER").
	Text string `json:"text"`
}

// stateValue is the part of a msgx.flight-state value the board reads.
type stateValue struct {
	FLID    int64          `json:"flid"`
	Version int64          `json:"version"`
	Doc     map[string]any `json:"doc"`
}

// Rows turns the projection into board rows sorted by scheduled time (then
// flight number, then FLID); flights whose SODT does not parse come last.
func Rows(flights []store.Flight) []Row {
	rows := make([]Row, 0, len(flights))
	for _, f := range flights {
		rows = append(rows, rowOf(f))
	}
	sortRows(rows)
	return rows
}

// sortRows sorts rows by scheduled time, then flight number, then FLID
// (the page's order too); rows whose SODT does not parse come last.
func sortRows(rows []Row) {
	slices.SortFunc(rows, compareRows)
}

// sortShared sorts shared rows as sortRows does.
func sortShared(rows []*Row) {
	slices.SortFunc(rows, func(a, b *Row) int { return compareRows(*a, *b) })
}

func compareRows(a, b Row) int {
	{
		switch az, bz := a.sortTime.IsZero(), b.sortTime.IsZero(); {
		case az && !bz:
			return 1
		case !az && bz:
			return -1
		}
		if c := a.sortTime.Compare(b.sortTime); c != 0 {
			return c
		}
		if c := cmp.Compare(a.FLNO, b.FLNO); c != 0 {
			return c
		}
		return cmp.Compare(a.FLID, b.FLID)
	}
}

func rowOf(f store.Flight) Row {
	var v stateValue
	if err := json.Unmarshal(f.Doc, &v); err != nil || v.Doc == nil {
		return Row{FLID: f.FLID, Route: []string{}, Flags: []Flag{}, Problem: "stored flight document cannot be read"}
	}
	d := v.Doc
	r := Row{
		FLID:         f.FLID,
		Version:      v.Version,
		FLNO:         text(d["FLNO"]),
		MVIN:         text(d["MVIN"]),
		SODT:         text(d["SODT"]),
		Route:        route(d),
		Stand:        text(d["STND"]),
		Gate:         gate(d["GTDT"]),
		Status:       text(d["FTSS"]),
		Flags:        flags(d),
		Registration: text(d["RENO"]),
		Aircraft:     text(d["ACFT"]),
	}
	r.Scheduled = r.SODT
	if t, ok := parseSISTime(r.SODT); ok {
		r.sortTime = t
		r.Scheduled = t.Format(readableLayout)
		r.T = t.Format(wallLayout)
	}
	return r
}

// parseSISTime parses DDMMMYYHHMM; month names match in any case.
func parseSISTime(s string) (time.Time, bool) {
	t, err := time.Parse(sisTimeLayout, strings.TrimSpace(s))
	return t, err == nil
}

// readable formats a SIS time for a sentence, or returns it unchanged.
func readable(s string) string {
	if t, ok := parseSISTime(s); ok {
		return t.Format(readableLayout)
	}
	return s
}

// text returns the text of a document value: a leaf string, or the #text of
// an element with attributes; "" for anything else.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case map[string]any:
		s, _ := x["#text"].(string)
		return strings.TrimSpace(s)
	}
	return ""
}

// attr returns an attribute of an element with attributes.
func attr(v any, name string) string {
	m, _ := v.(map[string]any)
	s, _ := m["@"+name].(string)
	return strings.TrimSpace(s)
}

// list returns a repeated structure as a slice of elements; a lone element
// (not wrapped in an array) is accepted too.
func list(v any) []map[string]any {
	var out []map[string]any
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
	case map[string]any:
		out = append(out, x)
	}
	return out
}

// sequence orders elements by a numeric sequence attribute (RTNO, GTNO),
// keeping input order for ties and for missing or non-numeric values.
func sequence(elems []map[string]any, name string) []map[string]any {
	num := func(m map[string]any) int {
		n, err := strconv.Atoi(attr(m, name))
		if err != nil {
			return int(^uint(0) >> 1)
		}
		return n
	}
	slices.SortStableFunc(elems, func(a, b map[string]any) int { return cmp.Compare(num(a), num(b)) })
	return elems
}

func route(d map[string]any) []string {
	legs := list(d["ERUT"])
	if len(legs) == 0 {
		legs = list(d["ROUT"])
	}
	stations := []string{}
	for _, leg := range sequence(legs, "RTNO") {
		if s := text(leg["APCD"]); s != "" {
			stations = append(stations, s)
		}
	}
	return stations
}

func gate(v any) string {
	for _, g := range sequence(list(v), "GTNO") {
		if s := text(g["GATE"]); s != "" {
			return s
		}
	}
	return ""
}

func flags(d map[string]any) []Flag {
	out := []Flag{}
	if c := text(d["CNCL"]); c != "" {
		out = append(out, Flag{Code: "CNCL", Text: "Cancelled " + readable(c)})
	}
	if v := d["FDIV"]; attr(v, "DDES") != "" {
		dest := attr(v, "DDES")
		dir := "to"
		if attr(v, "DDIR") == "FROM" {
			dir = "from"
		}
		out = append(out, Flag{Code: "FDIV " + dest, Text: withReason("Diverted "+dir+" "+dest, text(v))})
	}
	if v := d["FRET"]; set(v) {
		kind := map[string]string{"A": "Air return", "G": "Ground return"}[attr(v, "REID")]
		if kind == "" {
			kind = "Returned"
		}
		out = append(out, Flag{Code: "FRET", Text: withReason(kind, text(v))})
	}
	if v := d["FLAB"]; set(v) {
		kind := map[string]string{"O": "Aborted landing (overshoot)", "G": "Aborted landing (go-around)"}[attr(v, "ARES")]
		if kind == "" {
			kind = "Aborted landing"
		}
		out = append(out, Flag{Code: "FLAB", Text: withReason(kind, text(v))})
	}
	return out
}

// set reports whether an attribute-plus-text element carries anything: a
// cleared one is absent or empty.
func set(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x) != ""
	case map[string]any:
		for _, e := range x {
			if s, ok := e.(string); ok && strings.TrimSpace(s) != "" {
				return true
			}
		}
	}
	return false
}

func withReason(what, reason string) string {
	if reason == "" {
		return what
	}
	return what + ": " + reason
}
