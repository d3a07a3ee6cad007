// Package paging holds the control plane's listing conventions (R-N9): a
// limit with a default and a ceiling, and pages read one row beyond the
// limit so a call knows whether another page follows without a count.
package paging

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limit returns the effective limit of a listing: def for 0, max for
// anything above max; a negative v is INVALID_ARGUMENT.
func Limit(v int32, def, max int) (int, error) {
	switch {
	case v < 0:
		return 0, status.Errorf(codes.InvalidArgument, "limit %d: must not be negative (0 means %d)", v, def)
	case v == 0:
		return def, nil
	case int(v) > max:
		return max, nil
	}
	return int(v), nil
}

// NotNegative returns nil for v ≥ 0, else INVALID_ARGUMENT naming field:
// the cursor of a listing (before_id, after_seq, ...).
func NotNegative(field string, v int64) error {
	if v < 0 {
		return status.Errorf(codes.InvalidArgument, "%s %d: must not be negative", field, v)
	}
	return nil
}

// Trim cuts rows, read with a limit of limit+1, to limit and returns the
// last row kept when more follow: the cursor of the next page.
func Trim[T any](rows []T, limit int) (page []T, last T, more bool) {
	if len(rows) <= limit {
		return rows, last, false
	}
	return rows[:limit], rows[limit-1], true
}
