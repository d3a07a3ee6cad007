package flight

import "fmt"

// RejectError means a message is well-formed but violates the SIS rules for
// its subtype (e.g. FDIV DDIR="TOO"); the processor makes it DEAD(PROTOCOL).
type RejectError struct {
	Reason string
}

func (e *RejectError) Error() string { return "rejected: " + e.Reason }

func reject(format string, args ...any) error {
	return &RejectError{Reason: fmt.Sprintf(format, args...)}
}
