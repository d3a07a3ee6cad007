package recovery

import "errors"

// Why a rebuild was Interrupted; it starts over.
var (
	// errLockLost: the rebuild lock expired or Redis lost it, so another
	// instance may be rebuilding.
	errLockLost = errors.New("the rebuild lock expired or redis lost it")
	// errDataLost: Redis lost the versions hash or documents during the
	// rebuild, so what it wrote is not the whole projection.
	errDataLost = errors.New("redis lost the versions hash or documents during the rebuild")
)
