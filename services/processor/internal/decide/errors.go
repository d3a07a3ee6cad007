package decide

import "errors"

// ErrMasterCycle means refreshing code-share masters did not settle: the
// MAID references form a cycle longer than any real code-share chain. Fix
// the MAID values of the flights involved.
var ErrMasterCycle = errors.New("code-share masters keep changing (MAID cycle)")

// Skip ends a handler with SKIPPED and nothing written.
type Skip struct{ Reason string }

func (s *Skip) Error() string { return "skipped: " + s.Reason }

// Unsupported ends a handler whose message is legal but has no
// implementation: it is parked DEAD(UNSUPPORTED) (R-B9).
type Unsupported struct{ Reason string }

func (u *Unsupported) Error() string { return "UNSUPPORTED: " + u.Reason }

// Failure is a retryable outcome of a handler, with its error class.
type Failure struct{ Class, Reason string }

func (f *Failure) Error() string { return f.Class + ": " + f.Reason }

// A domain rejection (DEAD(PROTOCOL), nothing written) is a
// *flight.RejectError.
