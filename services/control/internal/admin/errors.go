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
