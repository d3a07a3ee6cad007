package flight

import (
	"slices"
	"strconv"
	"strings"

	"msgexchange/libs/clip"
	"msgexchange/services/internal/sis"
)

// requiredFLTR are the elements every daily flight record must carry.
var requiredFLTR = []string{"FLID", "ALCD", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT"}

// Record is one validated daily flight record (SCHD FLTR).
type Record struct {
	FLID int64
	// Doc is the record's document: every element as sent, except that
	// ROUT is normalised and inbound derived elements (MAFL, RUNSTATE,
	// VERBATIM) are kept under VERBATIM (see normalizeRoute, moveReserved).
	Doc Doc
	// Sent lists the top-level elements the record carried, in input
	// order, each once: what an ADFT merge replaces (see Merge).
	Sent []string
}

// FromFLTR turns a FLTR element into a validated record. A record missing a
// required element, or with an unreadable FLID or SODT, is rejected: the
// whole package is then refused (R-C6).
//
// An element present but empty (no attributes, no text, no children) is
// "no value": it is left out of the document, as a FLOP clear leaves it,
// so a flight cleared by a FLOP and the same flight in a snapshot with the
// element empty are the same document (no version bump for nothing). An
// empty member of a repeated element is dropped too (catalogue §2.7).
// Lists with a sequence attribute are ordered by it (see orderLists).
func FromFLTR(n *sis.Node, od OpDay) (Record, error) {
	doc := Doc{}
	addChildren(doc, withValue(n.Children))
	for _, name := range requiredFLTR {
		if s, ok := doc[name].(string); !ok || strings.TrimSpace(s) == "" {
			return Record{}, reject("FLTR %s: required element %s missing or empty", doc.String("FLID"), name)
		}
	}
	for _, name := range []string{"MVIN", "FLIN"} {
		if v := doc.String(name); !slices.Contains(codeDomains[name], v) {
			return Record{}, reject("FLTR %s: %s %q must be one of %s", doc.String("FLID"), name, v, strings.Join(codeDomains[name], "/"))
		}
	}
	flid, err := strconv.ParseInt(doc.String("FLID"), 10, 64)
	if err != nil || flid <= 0 {
		return Record{}, reject("FLTR: FLID %q is not a positive integer", doc.String("FLID"))
	}
	if _, err := od.Of(doc.String("SODT")); err != nil {
		return Record{}, reject("FLTR %d: %v", flid, err)
	}
	var sent []string
	seen := map[string]bool{}
	for _, c := range n.Children {
		if !seen[c.Name] {
			seen[c.Name] = true
			sent = append(sent, c.Name)
		}
	}
	moveReserved(doc)
	normalizeRoute(doc)
	orderLists(doc)
	return Record{FLID: flid, Doc: doc, Sent: sent}, nil
}

// DeleteFLID returns the FLID of a record of an SCHD DEL message, which
// deletes by FLID (catalogue §3): the record must carry a positive integer
// FLID; its other elements are ignored, so a record carrying only FLID is
// enough. Anything else is rejected: the whole package is then refused,
// like a snapshot with an unreadable record (R-C6, INV-19).
func DeleteFLID(n *sis.Node) (int64, error) {
	v := strings.TrimSpace(n.Child("FLID").Value())
	flid, err := strconv.ParseInt(v, 10, 64)
	if err != nil || flid <= 0 {
		return 0, reject("SCHD DEL: FLTR FLID %q is not a positive integer", clip.N(v, 40))
	}
	return flid, nil
}

// withValue returns the elements of children that are not bare.
func withValue(children []*sis.Node) []*sis.Node {
	out := make([]*sis.Node, 0, len(children))
	for _, c := range children {
		if !isBare(c) {
			out = append(out, c)
		}
	}
	return out
}

// Merge applies an ad-hoc flight record (SCHD ADFT) to the current document
// of an existing flight (R-C9, INV-14b): every top-level element the record
// carries replaces the stored one as a whole (a list element replaces the
// stored list, the record carrying the complete list), and every element it
// does not carry keeps its stored value. Inbound derived elements and the
// ROUT list as sent replace their VERBATIM entries the same way. cur is not
// modified.
func Merge(cur Doc, rec Record) Doc {
	out := cur.Clone()
	for _, name := range rec.Sent {
		switch {
		case IsDerived(name):
			if v, ok := verbatim(rec.Doc, name); ok {
				setVerbatim(out, name, v)
			} else {
				dropVerbatim(out, name)
			}
		case name == "ROUT":
			if v, ok := rec.Doc["ROUT"]; ok {
				out["ROUT"] = v
			} else {
				delete(out, "ROUT")
			}
			if v, ok := verbatim(rec.Doc, "ROUT"); ok {
				setVerbatim(out, "ROUT", v)
			} else {
				dropVerbatim(out, "ROUT")
			}
		default:
			if v, ok := rec.Doc[name]; ok {
				out[name] = v
			} else {
				delete(out, name) // sent empty: no value (see FromFLTR)
			}
		}
	}
	return out
}

// MasterFLID returns the code-share master of a document (MAID), if any.
func (d Doc) MasterFLID() (int64, bool) {
	v, ok := d.Int64("MAID")
	return v, ok && v > 0
}
