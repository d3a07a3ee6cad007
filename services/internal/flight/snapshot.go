package flight

import (
	"strconv"
	"strings"

	"msgexchange/services/internal/sis"
)

// requiredFLTR are the elements every daily flight record must carry.
var requiredFLTR = []string{"FLID", "ALCD", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT"}

// Record is one validated snapshot (FLTR) record.
type Record struct {
	FLID int64
	Doc  Doc
}

// FromFLTR turns a FLTR element into a validated record. A record missing a
// required element, or with an unreadable FLID or SODT, is rejected: the
// whole package is then refused (R-C6).
func FromFLTR(n *sis.Node, od OpDay) (Record, error) {
	doc := Doc{}
	addChildren(doc, n.Children)
	for _, name := range requiredFLTR {
		if s, ok := doc[name].(string); !ok || strings.TrimSpace(s) == "" {
			return Record{}, reject("FLTR %s: required element %s missing or empty", doc.String("FLID"), name)
		}
	}
	flid, err := strconv.ParseInt(doc.String("FLID"), 10, 64)
	if err != nil || flid <= 0 {
		return Record{}, reject("FLTR: FLID %q is not a positive integer", doc.String("FLID"))
	}
	if _, err := od.Of(doc.String("SODT")); err != nil {
		return Record{}, reject("FLTR %d: %v", flid, err)
	}
	return Record{FLID: flid, Doc: doc}, nil
}

// MasterFLID returns the code-share master of a document (MAID), if any.
func (d Doc) MasterFLID() (int64, bool) {
	v, ok := d.Int64("MAID")
	return v, ok && v > 0
}
