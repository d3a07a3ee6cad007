package pipeline

import (
	"context"
	"strings"

	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/decide"
)

// referenceResponse applies a reference RESP (R-C10: it replaces its type
// like a DNLD, decide.Reference) and closes the open RQRD request it
// answers, if any (R-D5), in the same transaction.
func (e *Engine) referenceResponse(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	out, err := decide.Reference(ctx, w.Writer, msg)
	if err != nil {
		return outcome{}, err
	}
	note := out.Note
	if strings.ToUpper(msg.Meta.STYP) == "RESP" {
		suffix, err := e.answerRQRD(ctx, w, msg)
		if err != nil {
			return outcome{}, err
		}
		note += suffix
	}
	return outcome{note: note}, nil
}
