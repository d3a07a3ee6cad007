package pipeline

import (
	"context"

	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/apply"
	"msgexchange/services/processor/internal/decide"
)

// season applies a season schedule (SCHS DNLD or RESP, R-C9) with
// decide.Season, reading and writing the message's transaction.
func (e *Engine) season(ctx context.Context, w *writer, msg *sis.Message) (decide.Outcome, error) {
	return decide.Season(ctx, apply.TxView{Tx: w.tx}, apply.TxSink{Tx: w.tx}, msg, w.msgID, w.now)
}
