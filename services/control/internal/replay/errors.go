package replay

import "errors"

// errContractMismatch marks a database value that the protobuf contract
// cannot express: a deployment bug, reported as codes.Internal.
var errContractMismatch = errors.New("database value unknown to the control-plane contract; update proto/msgx/control/v1")
