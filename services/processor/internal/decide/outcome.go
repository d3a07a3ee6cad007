package decide

import (
	"errors"

	"msgexchange/services/internal/flight"
)

// Outcome is what a handler decided besides its writes.
type Outcome struct {
	// Kind is what became of the message, set by Judge.
	Kind Kind
	// Class is the error class of Rejected, Parked and Retry.
	Class string
	// Note is the reason recorded with the state.
	Note string
	// Pending: earlier transactions of this message (a snapshot's batches)
	// left projections that are still pending, so it is APPLIED even if
	// this decision wrote none.
	Pending bool
	// Continue, when set, ends one batch of a larger package (a daily
	// snapshot, R-C6): the pipeline commits what was written and leaves
	// the message open with this progress as its reason.
	Continue string
}

// Kind is what became of a message, as a value: the pipeline writes the
// state transition it names (docs/architecture.md §3) and sorts no error
// types.
type Kind int

const (
	// Succeeded: done, with nothing waiting for the projector.
	Succeeded Kind = iota
	// Applied: flight changes are written whose projections are pending;
	// the message finishes when the projector acknowledges them (INV-23).
	Applied
	// Skipped: nothing applied; Note says why.
	Skipped
	// Rejected: a domain rejection, DEAD(PROTOCOL); nothing applied.
	Rejected
	// Parked: a failure a retry would repeat, DEAD(Class) until a replay
	// (R-K2); nothing applied.
	Parked
	// Continued: one batch of a larger package is written and the message
	// stays open with Continue as its progress (R-C6).
	Continued
	// Retry: a failure a retry may cure (Class); nothing applied, the
	// attempt counts with backoff.
	Retry
)

// Judge turns what a handler returned into the message's outcome: the one
// place where decide's error types (Skip, Unsupported, Failure,
// flight.RejectError) become values. projections is how many pending
// projections the handler's decision wrote. An error that is no outcome
// (a read of the view that failed, a panic's failure) is returned as it
// is.
func Judge(out Outcome, err error, projections int) (Outcome, error) {
	var rej *flight.RejectError
	var skip *Skip
	var unsup *Unsupported
	var fail *Failure
	switch {
	case err == nil && out.Continue != "":
		out.Kind = Continued
	case err == nil && (projections > 0 || out.Pending):
		out.Kind = Applied
	case err == nil:
		out.Kind = Succeeded
	case errors.As(err, &rej):
		return Outcome{Kind: Rejected, Class: ClassProtocol, Note: rej.Reason}, nil
	case errors.As(err, &skip):
		return Outcome{Kind: Skipped, Note: skip.Reason}, nil
	case errors.As(err, &unsup):
		return Outcome{Kind: Parked, Class: ClassUnsupported, Note: unsup.Reason}, nil
	case errors.As(err, &fail) && fail.Class != ClassInfra:
		return Outcome{Kind: Parked, Class: fail.Class, Note: fail.Reason}, nil
	case errors.As(err, &fail):
		return Outcome{Kind: Retry, Class: fail.Class, Note: fail.Reason}, nil
	default:
		return Outcome{}, err
	}
	return out, nil
}

// Error classes of the outcomes Judge gives.
const (
	ClassProtocol    = "PROTOCOL"
	ClassUnsupported = "UNSUPPORTED"
	ClassInfra       = "INFRA"
)
