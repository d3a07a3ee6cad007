package pipeline

import (
	"context"

	"msgexchange/services/processor/internal/decide"
)

// deleteWithChildren deletes flid and those of its ACTIVE code-share
// children that include accepts (decide.DeleteWithChildren).
func (e *Engine) deleteWithChildren(ctx context.Context, w *writer, flid int64, include func(int64) bool) (int, error) {
	return decide.DeleteWithChildren(ctx, w.Writer, flid, include)
}

// notFound is the reason part for a record whose flight is missing or
// deleted.
func notFound(flid int64, cur *flightRow) string { return decide.NotFound(flid, cur) }
