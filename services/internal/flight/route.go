package flight

import (
	"slices"
	"strings"
)

// MaxRoutePerDirection is how many ROUT entries a flight keeps per
// direction (R-C4, G-FLOP-SEMANTICS).
const MaxRoutePerDirection = 4

// Route directions of a ROUT entry.
const (
	routeInbound  = "inbound"  // a previous station (arrivals; carries SCDT)
	routeOutbound = "outbound" // a next station (departures; carries SCAT)
)

// routeTimes are the ROUT children that are not kept in the flight state:
// the catalogue (§3) documents ROUT as the previous/next stations with a
// scheduled time the peer ignores; the times are kept verbatim only.
var routeTimes = []string{"SCAT", "SCDT"}

// normalizeRoute applies the ROUT rule of a daily flight record (SCHD FLTR:
// snapshot and ADFT), R-C4:
//
//   - every entry keeps its attributes (RTNO) and children except SCAT and
//     SCDT, which are removed;
//   - each entry has a direction: inbound (a previous station) when it
//     carries SCDT and no SCAT, outbound (a next station) when it carries
//     SCAT and no SCDT, otherwise the flight's own — inbound for an arrival
//     (MVIN A), outbound for anything else;
//   - the entries are ordered by RTNO (entries without a valid RTNO last,
//     in input order), and the first MaxRoutePerDirection entries of each
//     direction in that order are kept; later ones are dropped;
//   - if this removed anything (a time or an entry), the ROUT list exactly
//     as sent is kept under VERBATIM.ROUT, so the input is not lost (R-C1),
//     but only the normalised list is flight state.
//
// A ROUT that is not a list of elements (it cannot be: ROUT is always a
// list) is left alone.
func normalizeRoute(d Doc) {
	list, ok := d["ROUT"].([]any)
	if !ok {
		return
	}
	own := routeOutbound
	if strings.TrimSpace(d.String("MVIN")) == "A" {
		own = routeInbound
	}
	kept := make([]any, 0, len(list))
	count := map[string]int{}
	changed := false
	for _, e := range sortBySeq(list, "RTNO") {
		m, isObj := e.(map[string]any)
		if !isObj {
			// A bare <ROUT>text</ROUT>: no times to remove, own direction.
			if count[own] >= MaxRoutePerDirection {
				changed = true
				continue
			}
			count[own]++
			kept = append(kept, e)
			continue
		}
		dir := own
		_, scat := m["SCAT"]
		_, scdt := m["SCDT"]
		switch {
		case scdt && !scat:
			dir = routeInbound
		case scat && !scdt:
			dir = routeOutbound
		}
		if count[dir] >= MaxRoutePerDirection {
			changed = true
			continue
		}
		count[dir]++
		entry := make(map[string]any, len(m))
		for k, v := range m {
			if slices.Contains(routeTimes, k) {
				changed = true
				continue
			}
			entry[k] = v
		}
		kept = append(kept, entry)
	}
	d["ROUT"] = kept
	if changed {
		setVerbatim(d, "ROUT", list)
	}
}
