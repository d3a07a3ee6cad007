package admin

import (
	"errors"

	"msgexchange/services/control/internal/rpcstatus"
)

// errContractMismatch marks a database value that the protobuf contract
// cannot express (for example a state added to the schema but not to the
// enum): a deployment bug, reported as codes.Internal.
var errContractMismatch = rpcstatus.ErrContractMismatch

// errRebuildBusy means another projection rebuild is being enqueued at this
// moment; the caller retries once it returned (codes.Aborted).
var errRebuildBusy = errors.New("another projection rebuild is being enqueued right now; retry when it has returned")

// errMessageTerminal means EndMessage found the message already terminal
// (SUCCEEDED, SKIPPED or DEAD); terminal states are final (INV-6), so it
// is refused with codes.FailedPrecondition.
var errMessageTerminal = errors.New("message is already terminal")

// errMessageNotFound means EndMessage found no processing record: the
// message was never registered, or was cleaned up (codes.NotFound).
var errMessageNotFound = errors.New("message not found")

// errRowChangedUnderLock means the message's row was no longer open when
// EndMessage wrote it, although it held the row lock: a bug or a hand
// edit, never a success (codes.Internal).
var errRowChangedUnderLock = errors.New("the message's row was no longer open under its row lock")
