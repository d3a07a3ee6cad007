package replay

import "msgexchange/services/control/internal/rpcstatus"

// errContractMismatch marks a database value that the protobuf contract
// cannot express: a deployment bug, reported as codes.Internal.
var errContractMismatch = rpcstatus.ErrContractMismatch
