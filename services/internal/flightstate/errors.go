package flightstate

import "errors"

// ErrInvalidManifest is wrapped when a projection-control record is not a
// valid rebuild manifest.
var ErrInvalidManifest = errors.New("invalid projection rebuild manifest")
