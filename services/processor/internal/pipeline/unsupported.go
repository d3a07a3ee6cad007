package pipeline

import (
	"context"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/processor/internal/decide"
)

// unsupportedError ends a handler whose message is legal but has no
// implementation yet (for example an inbound RQRD or RQFD, our own request
// types): it is parked like a message Classify found UNSUPPORTED.
type unsupportedError = decide.Unsupported

// parkedSuffix ends the reason of a parked message: what happened and what
// brings it back.
const parkedSuffix = " (parked DEAD(UNSUPPORTED) at its first attempt so that it does not hold the FIFO; replay it once this gateway handles it)"

// The UNSUPPORTED policy (R-B9 as amended by the issue on SIS fidelity).
//
// A legal TYPE/STYP pair that waits for an implementation is not a fault a
// retry can cure: the next attempt fails the same way until a release
// brings its handler. Retried with backoff up to max-attempts, every such
// message would hold the FIFO head — and every message behind it — for the
// whole backoff series (1+2+4+8 s by default, up to head-deadline when the
// head stays longer), only to end DEAD(EXHAUSTED) anyway, with its class
// overwritten. So it is parked at its first attempt instead:
// DEAD(UNSUPPORTED), with its backfill intent in the same statement (INV-8,
// R-B6) and a reason naming the pair, and the FIFO goes on at once. It is
// never treated as "illegal": UNSUPPORTED stays on the replay whitelist
// (ReplayableClasses), so an operator replays the parked messages by class
// and time range once a release handles the pair. The class is kept (not
// EXHAUSTED), which is what such a replay selects by.

// parkUnsupported parks the head msgID DEAD(UNSUPPORTED) with its backfill
// intent, in a transaction of its own that hands the execution marker on.
func (e *Engine) parkUnsupported(ctx context.Context, msgID int64, meta *metaCols, reason string) error {
	if err := e.finishNonBusiness(ctx, msgID, meta, StateDead, ClassUnsupported, reason+parkedSuffix); err != nil {
		return err
	}
	e.metrics.failed.Add(ctx, 1, classAttr(ClassUnsupported))
	return nil
}

// parkUnsupportedIn is parkUnsupported inside the message's own
// transaction, after its handler found the message unsupported. Like
// finishIn's own counter, the count is taken before that transaction
// commits.
func (e *Engine) parkUnsupportedIn(ctx context.Context, tx pgx.Tx, msgID int64, meta *metaCols, reason string) error {
	e.metrics.failed.Add(ctx, 1, classAttr(ClassUnsupported))
	return e.finishIn(ctx, tx, msgID, meta, StateDead, ClassUnsupported, reason+parkedSuffix)
}
