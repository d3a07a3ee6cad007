package flight

import (
	"slices"
	"strconv"
	"strings"
)

// Keys of a flight document that no input ever sets. MAFL and RUNSTATE are
// derived from the flight's state each time it is written; VERBATIM keeps
// input that is not used as state (see Verbatim).
const (
	// KeyMAFL is the derived code-share flight list of a master flight
	// (R-C8, INV-21): its ACTIVE children as [{"FLID","FLNO"}] sorted by
	// FLID, absent when it has none.
	KeyMAFL = "MAFL"
	// KeyRunState is the derived running state (see RunningState).
	KeyRunState = "RUNSTATE"
	// KeyVerbatim holds input kept as sent but never used as state: an
	// inbound MAFL or RUNSTATE element (those are derived, never parsed),
	// an inbound VERBATIM element, and the ROUT list as sent when its
	// normalisation dropped something (see normalizeRoute). It is an object
	// element name → value as sent, absent when empty.
	KeyVerbatim = "VERBATIM"
)

// derivedKeys are the keys a document derives and therefore never takes
// from input.
var derivedKeys = []string{KeyMAFL, KeyRunState, KeyVerbatim}

// IsDerived reports whether name is a key the document derives (MAFL,
// RUNSTATE) or reserves (VERBATIM): an inbound element of that name is
// moved under VERBATIM instead.
func IsDerived(name string) bool { return slices.Contains(derivedKeys, name) }

// Running states, in precedence order: the first that applies wins.
const (
	// RunCancelled: CNCL (cancellation time) has a value. An empty CNCL
	// (un-cancel) resets it.
	RunCancelled = "CANCELLED"
	// RunDiverted: FDIV has a diversion airport (DDES).
	RunDiverted = "DIVERTED"
	// RunReturned: FRET (return to stand or ramp) is present.
	RunReturned = "RETURNED"
	// RunLanded: an arrival (MVIN A) with an actual time (ACTT).
	RunLanded = "LANDED"
	// RunDeparted: a departure (any MVIN but A) with an actual time (ACTT).
	RunDeparted = "DEPARTED"
	// RunAbortedLanding: FLAB (overshoot or go-around) is present.
	RunAbortedLanding = "ABORTED_LANDING"
	// RunLastCall: LACL (last call) has a value.
	RunLastCall = "LAST_CALL"
	// RunBoarding: BOTM (boarding open) has a value.
	RunBoarding = "BOARDING"
	// RunScheduled: none of the above.
	RunScheduled = "SCHEDULED"
)

// RunningState derives the running state of a flight from its document.
// The state is not sent by the AODB: it follows from the status elements
// (R-C4, G-FLOP-SEMANTICS), so setting one of them (FLOP BOTM, LACL, CNCL,
// FDIV, FRET, FLAB, or a snapshot carrying them or ACTT) sets the state,
// and clearing it resets the state to whatever the remaining elements say.
// Precedence: CANCELLED > DIVERTED > RETURNED > LANDED/DEPARTED >
// ABORTED_LANDING > LAST_CALL > BOARDING > SCHEDULED. An element counts
// when it has a value: a non-blank string, or an element with a non-blank
// attribute or text (FDIV needs a non-blank DDES).
func RunningState(d Doc) string {
	switch {
	case hasValue(d["CNCL"]):
		return RunCancelled
	case hasAttr(d["FDIV"], "DDES"):
		return RunDiverted
	case hasValue(d["FRET"]):
		return RunReturned
	case hasValue(d["ACTT"]):
		if strings.TrimSpace(d.String("MVIN")) == "A" {
			return RunLanded
		}
		return RunDeparted
	case hasValue(d["FLAB"]):
		return RunAbortedLanding
	case hasValue(d["LACL"]):
		return RunLastCall
	case hasValue(d["BOTM"]):
		return RunBoarding
	}
	return RunScheduled
}

// hasValue reports a value that is not "no value": a non-blank string, an
// object with a non-blank attribute, text or child, or a list with such a
// member.
func hasValue(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x) != ""
	case map[string]any:
		for _, c := range x {
			if hasValue(c) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if hasValue(c) {
				return true
			}
		}
	}
	return false
}

// hasAttr reports an object whose attribute name is not blank.
func hasAttr(v any, name string) bool {
	m, _ := v.(map[string]any)
	s, _ := m["@"+name].(string)
	return strings.TrimSpace(s) != ""
}

// Child is one code-share child of a master flight, as listed in its MAFL.
type Child struct {
	FLID int64
	FLNO string
}

// Derive returns a copy of d with its derived keys computed: RUNSTATE from
// the document, MAFL from children (the master's ACTIVE code-share
// children, R-C8). The children are sorted by FLID; the flight itself and
// repeated FLIDs are left out; MAFL is absent when none remain.
func Derive(d Doc, flid int64, children []Child) Doc {
	out := d.Clone()
	out[KeyRunState] = RunningState(out)
	kids := slices.Clone(children)
	slices.SortFunc(kids, func(a, b Child) int { return int(sign(a.FLID - b.FLID)) })
	var mafl []any
	var last int64
	for _, c := range kids {
		if c.FLID == flid || c.FLID <= 0 || c.FLID == last {
			continue
		}
		last = c.FLID
		mafl = append(mafl, map[string]any{"FLID": strconv.FormatInt(c.FLID, 10), "FLNO": c.FLNO})
	}
	if len(mafl) == 0 {
		delete(out, KeyMAFL)
	} else {
		out[KeyMAFL] = mafl
	}
	return out
}

func sign(v int64) int64 {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// moveReserved moves inbound elements named like a derived or reserved key
// under VERBATIM, so that nothing sent is lost (R-C1) but it never drives
// state (R-C8: MAFL is derived, never parsed).
func moveReserved(d Doc) {
	sent := map[string]any{}
	for _, k := range derivedKeys {
		if v, ok := d[k]; ok {
			sent[k] = v
			delete(d, k)
		}
	}
	for _, k := range derivedKeys {
		if v, ok := sent[k]; ok {
			setVerbatim(d, k, v)
		}
	}
}

// setVerbatim keeps v as sent under VERBATIM[name].
func setVerbatim(d Doc, name string, v any) {
	vb, _ := d[KeyVerbatim].(map[string]any)
	if vb == nil {
		vb = map[string]any{}
		d[KeyVerbatim] = vb
	}
	vb[name] = v
}

// verbatim returns VERBATIM[name] and whether it is there.
func verbatim(d Doc, name string) (any, bool) {
	vb, _ := d[KeyVerbatim].(map[string]any)
	v, ok := vb[name]
	return v, ok
}

// dropVerbatim removes VERBATIM[name], and VERBATIM when it is then empty.
func dropVerbatim(d Doc, name string) {
	vb, _ := d[KeyVerbatim].(map[string]any)
	if vb == nil {
		return
	}
	delete(vb, name)
	if len(vb) == 0 {
		delete(d, KeyVerbatim)
	}
}
