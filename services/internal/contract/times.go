package contract

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"msgexchange/services/internal/flight"
)

// Times returns, for every SIS time (DDMMMYYHHMM) in doc, its JSON Pointer
// (RFC 6901) within doc mapped to the same wall-clock time in zone as ISO
// 8601 with the zone's offset (RFC 3339, e.g. 2021-01-23T05:35:00+08:00).
//
// Why every value of that shape and not a list of element names: SIS times
// sit at the top level (SODT, ESTT, CNCL, …), inside lists (GTDT/PGOT,
// PSDT/STST, …), in attributes (DELY/@STRT) and in the VERBATIM part of a
// document; a list of names would miss the next element the catalogue
// adds. Free-text elements (remarks, reasons) are never read as times,
// whatever they contain. A value that only looks like a time but is no
// date (31FEB…) is left out.
//
// The result is empty, not nil, for a document without times; zone may be
// nil only then.
func Times(doc flight.Doc, zone *time.Location) (map[string]string, error) {
	out := map[string]string{}
	var missingZone bool
	walkTimes(map[string]any(doc), "", "", func(ptr, sis string) {
		if zone == nil {
			missingZone = true
			return
		}
		t, err := flight.ParseDateTime(sis, zone)
		if err != nil {
			return // isSISTime already parsed it; cannot happen
		}
		out[ptr] = t.Format(time.RFC3339)
	})
	if missingZone {
		return nil, fmt.Errorf("reading SIS times: %w", ErrNoZone)
	}
	return out, nil
}

// walkTimes calls on for every string in v (at JSON Pointer ptr, value of
// element elem) that is a SIS time.
func walkTimes(v any, ptr, elem string, on func(ptr, sis string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			child := elem
			switch {
			case k == "#text": // the element's own text: still elem
			case strings.HasPrefix(k, "@"):
				child = "" // an attribute is never free text
			default:
				child = k
			}
			walkTimes(c, ptr+"/"+escapePointer(k), child, on)
		}
	case flight.Doc:
		walkTimes(map[string]any(x), ptr, elem, on)
	case []any:
		for i, c := range x {
			walkTimes(c, ptr+"/"+strconv.Itoa(i), elem, on)
		}
	case string:
		if !flight.IsFreeText(elem) && isSISTime(x) {
			on(ptr, x)
		}
	}
}

// isSISTime reports whether s is exactly a valid DDMMMYYHHMM time.
func isSISTime(s string) bool {
	if len(s) != 11 {
		return false
	}
	for i := 2; i < 5; i++ {
		if s[i] < 'A' || s[i] > 'Z' { // months are upper-case English
			return false
		}
	}
	_, err := flight.ParseDateTime(s, time.UTC)
	return err == nil
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes one JSON Pointer reference token (RFC 6901 §3).
func escapePointer(s string) string { return pointerEscaper.Replace(s) }
