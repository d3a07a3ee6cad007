package store

import "errors"

// ErrNotFound is returned by Get when the projection holds no current
// document for the FLID (never projected, or deleted).
var ErrNotFound = errors.New("flight not in projection")

// ErrIncomplete is returned by the serving reads (All, Get) and by
// CheckComplete when Redis does not hold the whole projection: it lost it
// (restart without persistence, FLUSHALL, failover to an empty replica,
// eviction) or a rebuild from PostgreSQL has not finished yet (R-H5). The
// projector rebuilds it by itself; the reader should retry shortly.
var ErrIncomplete = errors.New("flight projection incomplete in redis")
