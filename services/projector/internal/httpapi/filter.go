package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"msgexchange/services/internal/flight"
)

// Query parameters of GET /all/flights.
const (
	paramDay      = "day"
	paramMovement = "movement"
	paramFrom     = "from"
	paramTo       = "to"
)

// knownParams are every query parameter GET /all/flights accepts (the
// filters and the item version); any other is refused, so that a misspelt
// filter (movment=A) is a 400 and not the whole list of 100,000 flights.
var knownParams = []string{paramDay, paramMovement, paramFrom, paramTo, paramVersion}

// timeLayouts are the ISO-8601 forms accepted for from and to: with
// seconds (RFC 3339) or without, always with a zone offset or Z, because
// an instant without one would silently mean the server's zone.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"}

// filter selects flights of GET /all/flights; the zero filter selects
// every flight.
type filter struct {
	// day is the operation day (YYYY-MM-DD) a flight must have; "" for any.
	day string
	// movement is "A" or "D"; "" for any.
	movement string
	// from and to bound the scheduled time (SODT, airport time) to
	// [from, to); zero for no bound.
	from, to time.Time
	// zone is the airport's time zone, in which SODT is read.
	zone *time.Location
}

// any reports whether the filter selects anything less than every flight.
func (f filter) any() bool {
	return f.day != "" || f.movement != "" || !f.from.IsZero() || !f.to.IsZero()
}

// parseFilter reads the query of GET /all/flights. Each error names the
// parameter and says what is expected.
func parseFilter(q url.Values, zone *time.Location) (filter, error) {
	f := filter{zone: zone}
	for name, vals := range q {
		if !slices.Contains(knownParams, name) {
			return filter{}, fmt.Errorf("unknown query parameter %q; GET /all/flights takes day, movement, from, to and v", name)
		}
		if len(vals) != 1 {
			return filter{}, fmt.Errorf("query parameter %q given %d times; give it once", name, len(vals))
		}
	}
	if v, ok := q[paramDay]; ok {
		d, err := time.Parse(time.DateOnly, v[0])
		if err != nil {
			return filter{}, fmt.Errorf("day=%q: want an operation day as YYYY-MM-DD, e.g. day=2026-12-01", v[0])
		}
		f.day = d.Format(time.DateOnly)
	}
	if v, ok := q[paramMovement]; ok {
		switch m := strings.ToUpper(v[0]); m {
		case "A", "D":
			f.movement = m
		default:
			return filter{}, fmt.Errorf("movement=%q: want A (arrivals) or D (departures)", v[0])
		}
	}
	var err error
	if f.from, err = parseInstant(q, paramFrom); err != nil {
		return filter{}, err
	}
	if f.to, err = parseInstant(q, paramTo); err != nil {
		return filter{}, err
	}
	if !f.from.IsZero() && !f.to.IsZero() && !f.from.Before(f.to) {
		return filter{}, fmt.Errorf("from=%s is not before to=%s; the window is [from, to)", q.Get(paramFrom), q.Get(paramTo))
	}
	return f, nil
}

func parseInstant(q url.Values, name string) (time.Time, error) {
	v, ok := q[name]
	if !ok {
		return time.Time{}, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, v[0]); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s=%q: want an ISO-8601 time with a zone offset, e.g. %s=2026-12-01T08:00:00+08:00 (a + in a query must be sent as %%2B)", name, v[0], name)
}

// filterDoc is the part of a stored flight-state value the filter reads.
type filterDoc struct {
	OperationDay string `json:"operation_day"`
	Doc          struct {
		MVIN any `json:"MVIN"`
		SODT any `json:"SODT"`
	} `json:"doc"`
}

// match reports whether the stored value doc passes the filter; an error
// means doc is not a flight-state JSON object.
func (f filter) match(doc []byte) (bool, error) {
	var d filterDoc
	if err := json.Unmarshal(doc, &d); err != nil {
		return false, fmt.Errorf("decoding a stored flight for the filter: %w", err)
	}
	if f.day != "" && d.OperationDay != f.day {
		return false, nil
	}
	if f.movement != "" && text(d.Doc.MVIN) != f.movement {
		return false, nil
	}
	if f.from.IsZero() && f.to.IsZero() {
		return true, nil
	}
	// A flight whose scheduled time does not parse lies in no window.
	t, err := flight.ParseDateTime(text(d.Doc.SODT), f.zone)
	if err != nil {
		return false, nil
	}
	if !f.from.IsZero() && t.Before(f.from) {
		return false, nil
	}
	if !f.to.IsZero() && !t.Before(f.to) {
		return false, nil
	}
	return true, nil
}

// text returns the text of a document value: a leaf string, or the #text
// of an element with attributes.
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
