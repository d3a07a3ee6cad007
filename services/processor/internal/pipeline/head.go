package pipeline

import (
	"time"

	"msgexchange/libs/lease"

	"msgexchange/services/internal/procstate"
)

// States and error classes of proc_state.
const (
	StatePending   = "PENDING"
	StateApplied   = "APPLIED"
	StateSucceeded = "SUCCEEDED"
	StateSkipped   = "SKIPPED"
	StateFailed    = "FAILED"
	StateDead      = "DEAD"

	ClassMalformed   = "MALFORMED"
	ClassCodec       = "CODEC_ERROR"
	ClassUnsupported = "UNSUPPORTED"
	ClassInfra       = "INFRA"
	ClassProtocol    = "PROTOCOL"
	ClassExhausted   = "EXHAUSTED"
)

// head is the FIFO head: the smallest unfinished mailbox ID (INV-3).
type head struct {
	MsgID               int64
	State               string
	Attempts            int
	NextAttemptAt       *time.Time
	ProcessingStartedAt *time.Time
	ErrorClass          *string
	Raw                 string
	// ExecutingBy is the instance whose execution of the message is in
	// flight (proc_state.executing_by), nil when none is (R-H1).
	ExecutingBy *string
	// ExecutingThrough is, on a head marked for a batch, the batch's last
	// message (proc_state.executing_through); nil for a single message.
	ExecutingThrough *int64
	// TraceParent and TraceState are the trace context stored when the
	// message was registered (R-I4); nil when it has none.
	TraceParent, TraceState *string
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// metaCols are the META values written with a state transition.
type metaCols = procstate.Meta

// deadClasses and parkedClasses are the error classes with which the
// processor itself ends a message DEAD; every one is counted from zero,
// so an alert on any increase works from the first scrape. DEAD(OPERATOR)
// is an operator's decision, made through the control plane, and is not
// counted here.
var (
	deadClasses   = []string{ClassMalformed, ClassProtocol, ClassExhausted}
	parkedClasses = []string{ClassCodec, ClassUnsupported}
)

// parkedClass reports whether a message that ends DEAD with this class is
// parked: replayable by class once a release handles it, rather than
// rejected for good (MALFORMED, PROTOCOL) or given up on (EXHAUSTED).
func parkedClass(class string) bool {
	return class == ClassUnsupported || class == ClassCodec
}

// headsRead is what loadHeads reads: the heads and the replay flag, and,
// when read ahead with a batch's COMMIT, the floor generation it was read
// at.
type headsRead struct {
	heads   []*head
	replays bool
	gen     uint64
	term    *lease.Term // of the batch that read them ahead
	read    bool        // the heads were read (after a COMMIT: it committed)
}
