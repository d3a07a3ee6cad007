package projector

import "errors"

// ErrMissingDependency is wrapped when New is given Deps without a
// required field.
var ErrMissingDependency = errors.New("projector: missing dependency")
