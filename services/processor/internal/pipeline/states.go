package pipeline

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
