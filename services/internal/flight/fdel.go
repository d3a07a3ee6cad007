package flight

import "msgexchange/services/internal/sis"

// CheckFDEL validates the FDEL element of one record of an FDEL message
// (catalogue §5.1: "the FDEL element must be empty"): text, child elements
// or attributes — even an empty one — reject the message. The rule lives
// here, beside the other FLOP rules, so that the FLOP outcome table of the
// message-types reference is computed from the check the processor runs.
// The record's FLID and the deletion itself are the processor's.
func CheckFDEL(rec *sis.Node) error {
	if f := rec.Child("FDEL"); f != nil && (f.Value() != "" || len(f.Children) > 0 || len(f.Attrs) > 0) {
		return reject("FDEL element must be empty")
	}
	return nil
}
