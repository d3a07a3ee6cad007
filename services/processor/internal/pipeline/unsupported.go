package pipeline

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The parking policy (R-B9 as amended by the issue on SIS fidelity, and
// R-K2).
//
// A failure that would repeat identically on retry is not a fault a retry
// can cure: a legal TYPE/STYP pair that waits for an implementation, and a
// message the codec cannot read (CODEC_ERROR: a DOCTYPE, an undecodable or
// unsupported charset, an XML version other than 1.0), fail the same way
// at every attempt until a release brings a handler or a codec fix, or the
// sender resends the message fixed. Retried with backoff up to
// max-attempts, every such message would hold the FIFO head — and every
// message behind it — for the whole backoff series (1+2+4+8 s by default,
// up to head-deadline when the head stays longer), only to end
// DEAD(EXHAUSTED) anyway, with its class overwritten; a stream of them
// stalls every flight update. So it is parked at its first attempt
// instead: DEAD with its own class, its backfill intent in the same
// statement (INV-8, R-B6) and a reason saying what brings it back, and the
// FIFO goes on at once. Both classes stay on the replay whitelist
// (ReplayableClasses), so an operator replays the parked messages by class
// and time range once the fix is deployed. The class is kept (not
// EXHAUSTED), which is what such a replay selects by. Only INFRA failures
// — the ones that can heal by themselves — wait at the head with backoff.

// parkedReason ends the reason of a parked message with what happened and
// what brings it back.
func parkedReason(class, reason string) string {
	fix := "replay it once this gateway handles it"
	if class == ClassCodec {
		fix = "replay it once the codec reads it, or have the sender resend it fixed"
	}
	return reason + " (parked DEAD(" + class + ") at its first attempt so that it does not hold the FIFO; " + fix + ")"
}

// parkIn parks msgID DEAD(class) inside the message's own transaction,
// after its handler found the message unsupported. Like finishIn's own
// counter, the count is taken before that transaction commits.
func (e *Engine) parkIn(ctx context.Context, tx pgx.Tx, msgID int64, meta *metaCols, class, reason string) error {
	e.metrics.failed.Add(ctx, 1, classAttr(class))
	return e.finishIn(ctx, tx, msgID, meta, StateDead, class, parkedReason(class, reason))
}
