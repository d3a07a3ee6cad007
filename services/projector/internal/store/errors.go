package store

import "errors"

// ErrNotFound is returned by Get when the projection holds no current
// document for the FLID (never projected, or deleted).
var ErrNotFound = errors.New("flight not in projection")
