package ociimage

import "errors"

var (
	// ErrMissingInput reports a file the image needs that this machine lacks
	// (the CA bundle, the zone data, dpkg's records); scripts/image.sh
	// installs the Debian packages that provide them.
	ErrMissingInput = errors.New("missing build input (run scripts/image.sh, which installs ca-certificates and tzdata)")

	// ErrNoImage reports a layout without an image of the asked reference.
	ErrNoImage = errors.New("no image with that reference in the layout")
)
