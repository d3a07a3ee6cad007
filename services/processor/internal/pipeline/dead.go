package pipeline

import (
	"context"
	"log/slog"

	"msgexchange/libs/clip"
)

// Alert keys of the ERROR line logged for a message that ended DEAD (R-L4).
const (
	// AlertMessageDead: the message was rejected for good (MALFORMED,
	// PROTOCOL) or given up on (EXHAUSTED); its change is not applied.
	AlertMessageDead = "message-dead"
	// AlertMessageParked: the message was parked (CODEC_ERROR, UNSUPPORTED)
	// and waits for a replay once a release reads or handles it.
	AlertMessageParked = "message-parked"
)

// reportDead counts a message the processor ended DEAD, by class, in
// msgx_processor_parked_messages_total when it is parked and in
// msgx_processor_dead_messages_total otherwise, and logs it at ERROR with
// an alert key: a dead message is a flight change or reference update not
// applied, and nobody notices a WARN (R-L4). attrs are added to the line.
func (e *Engine) reportDead(ctx context.Context, msgID int64, class, reason string, attrs ...any) {
	alert := AlertMessageDead
	if parkedClass(class) {
		alert = AlertMessageParked
		e.metrics.parked.Add(ctx, 1, classAttr(class))
	} else {
		e.metrics.dead.Add(ctx, 1, classAttr(class))
	}
	e.log.Log(ctx, slog.LevelError, "message finished", append([]any{"msg_id", msgID, "state", StateDead, "class", class,
		"reason", clip.Text(reason), "alert", alert}, attrs...)...)
}
