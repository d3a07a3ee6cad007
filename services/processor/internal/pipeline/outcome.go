package pipeline

import (
	"msgexchange/services/internal/sis"
)

// reading is what reading a message decided before any handler runs:
// decoding it, the ignore list, classifying it. The one message path
// (execute) and a batch (prepareOne) both act on it, so their outcomes
// cannot drift apart (R-J1).
type reading struct {
	msg  *sis.Message
	meta *metaCols
	cls  sis.Classification
	// retry is set when decoding or classifying must be tried again (a
	// panic, INFRA): the message's attempt fails.
	retry *failure
	// state is set when the message ends here — DEAD MALFORMED, SKIPPED
	// (an ignored type), DEAD CODEC_ERROR or UNSUPPORTED (parked, R-K2;
	// reason without parkedReason's ending) — with its class and reason.
	state, class, reason string
	parked               bool
}
