package pipeline

import (
	"context"

	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/decide"
)

// referenceResponse applies a reference RESP and closes the open RQRD
// request it answers, if any, in the same transaction
// (decide.ReferenceResponse, R-C10, R-D5).
func (e *Engine) referenceResponse(ctx context.Context, w *writer, msg *sis.Message) (decide.Outcome, error) {
	return decide.ReferenceResponse(ctx, w.Writer, e.requests(w), msg)
}
