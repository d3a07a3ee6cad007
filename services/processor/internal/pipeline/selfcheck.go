package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/procstate"
	"msgexchange/services/internal/stranded"
)

// Defaults of the self-check, used where Options leave them zero.
const (
	// DefaultSelfCheckInterval is how often the self-check looks for
	// stranded messages (R-H4).
	DefaultSelfCheckInterval = 30 * time.Second
	// DefaultSelfCheckGrace is how old a stranded state must be before the
	// self-check repairs it, so it never acts on a state a live
	// transaction is still completing.
	DefaultSelfCheckGrace = time.Minute

	// selfCheckPage is how many candidates the self-check reads at once.
	selfCheckPage = 500
)

func (e *Engine) selfCheckInterval() time.Duration {
	if e.opt.SelfCheckInterval > 0 {
		return e.opt.SelfCheckInterval
	}
	return DefaultSelfCheckInterval
}

func (e *Engine) selfCheckGrace() time.Duration {
	if e.opt.SelfCheckGrace > 0 {
		return e.opt.SelfCheckGrace
	}
	return DefaultSelfCheckGrace
}

// SelfCheckResult is what one self-check run repaired (R-H4).
type SelfCheckResult struct {
	// Cutoff is the grace cutoff: only states older than it were repaired.
	Cutoff time.Time
	// Applied are the APPLIED messages without a pending projection that
	// were finished SUCCEEDED with their backfill intent, in msg_id order.
	Applied []int64
	// Terminal are the terminal messages without a backfill intent that got
	// one, in finish order.
	Terminal []int64
}

// selfCheck runs the self-check for the maintenance loop: a failed run is
// logged and the next interval tries again.
func (e *Engine) selfCheck(ctx context.Context) {
	// The head floor's safety net (floor.go): a message opened by a path
	// that does not lower the floor waits at most one interval.
	e.floor.reset()
	res, err := e.RunSelfCheck(ctx)
	if err != nil && ctx.Err() == nil {
		e.log.Error("self-check failed; next run at the next interval", "err", err,
			"repaired_applied", len(res.Applied), "repaired_terminal", len(res.Terminal), "alert", "selfcheck-failed")
	}
}

// RunSelfCheck finds every message whose next step is not scheduled and
// finishes it (R-H4). Every other state of a message has a next step that
// something is bound to take: PENDING and FAILED are the executor's head or
// behind it, APPLIED waits for the acks of its pending projections, and a
// terminal message's backfill intent waits for the dispatcher. Two states
// have none:
//
//   - APPLIED without a pending projection: no ack will ever move it. It is
//     finished SUCCEEDED with its backfill intent, as the last ack would
//     have done.
//   - terminal, not marked, without a backfill intent that is not SENT (a
//     SENT one belongs to an earlier outcome before a replay): the mailbox
//     row would never be marked. The intent is written, with the finish
//     time as its creation time, so the dispatcher's overdue bound still
//     counts from the finish (INV-7).
//
// Only states older than the self-check grace are considered, and each
// repair is one fenced transaction that locks the message's row and checks
// its state again in a statement that starts after the lock is held, so a
// transaction that is still completing the message (an ack, the executor,
// a replay) is waited for and never raced. Each repair is counted in
// msgx_processor_selfcheck_repaired_total{kind} and logged at ERROR with
// alert "stranded-message": a repair means a path that should have
// scheduled the next step did not, which is a bug to report. The
// candidates are read through partial indexes that hold only APPLIED and
// only unmarked terminal messages, never the terminal history. A failing
// repair (the lease lost included) ends the run at once.
func (e *Engine) RunSelfCheck(ctx context.Context) (SelfCheckResult, error) {
	res := SelfCheckResult{Cutoff: e.clock.Now().Add(-e.selfCheckGrace())}
	var after int64
	for {
		rows, err := e.pool.Query(ctx, `
			SELECT ps.msg_id FROM proc_state ps
			WHERE ps.msg_id > $2 AND `+stranded.AppliedWithoutProjection("$1")+`
			ORDER BY ps.msg_id LIMIT $3`, res.Cutoff, after, selfCheckPage)
		if err != nil {
			return res, fmt.Errorf("listing applied messages without pending projections: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return res, fmt.Errorf("listing applied messages without pending projections: %w", err)
		}
		for _, id := range ids {
			ok, err := e.repairApplied(ctx, id, res.Cutoff)
			if err != nil {
				return res, err
			}
			if ok {
				res.Applied = append(res.Applied, id)
				e.reportRepair(ctx, id, StrandedApplied)
			}
		}
		if len(ids) < selfCheckPage {
			break
		}
		after = ids[len(ids)-1]
	}
	var afterAt time.Time // keyset (finished_at, msg_id); the zero time precedes every finish
	after = 0
	for {
		rows, err := e.pool.Query(ctx, `
			SELECT ps.msg_id, ps.finished_at FROM proc_state ps
			WHERE (ps.finished_at, ps.msg_id) > ($2, $3) AND `+stranded.TerminalWithoutIntent("$1")+`
			ORDER BY ps.finished_at, ps.msg_id LIMIT $4`, res.Cutoff, afterAt, after, selfCheckPage)
		if err != nil {
			return res, fmt.Errorf("listing terminal messages without backfill intent: %w", err)
		}
		type candidate struct {
			id       int64
			finished time.Time
		}
		cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
			var c candidate
			err := r.Scan(&c.id, &c.finished)
			return c, err
		})
		if err != nil {
			return res, fmt.Errorf("listing terminal messages without backfill intent: %w", err)
		}
		for _, c := range cands {
			ok, err := e.repairTerminal(ctx, c.id, res.Cutoff)
			if err != nil {
				return res, err
			}
			if ok {
				res.Terminal = append(res.Terminal, c.id)
				e.reportRepair(ctx, c.id, StrandedTerminal)
			}
		}
		if len(cands) < selfCheckPage {
			break
		}
		last := cands[len(cands)-1]
		afterAt, after = last.finished, last.id
	}
	return res, nil
}

// reportRepair counts and logs one repair of the self-check.
func (e *Engine) reportRepair(ctx context.Context, msgID int64, kind string) {
	e.metrics.selfCheckRepaired.Add(ctx, 1, kindAttr(kind))
	e.log.Error("stranded message finished by the self-check", "msg_id", msgID, "kind", kind, "alert", "stranded-message")
}

// repairApplied finishes msgID SUCCEEDED with its backfill intent if it is
// still APPLIED since before cutoff without a pending projection, checked
// after its row lock is held. It reports whether it did.
func (e *Engine) repairApplied(ctx context.Context, msgID int64, cutoff time.Time) (bool, error) {
	var repaired bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		b := lockBatch(msgID)
		procstate.QueueSucceed(b, []int64{msgID}, e.clock.Now(), &cutoff, func(done []procstate.SucceededAt) error {
			repaired = len(done) == 1
			return nil
		})
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return false, fmt.Errorf("finishing stranded applied message %d: %w", msgID, err)
	}
	if repaired {
		e.metrics.finished.Add(ctx, 1, stateAttr(StateSucceeded))
	}
	return repaired, nil
}

// repairTerminal writes the missing backfill intent of msgID if it is
// still terminal since before cutoff, unmarked and without an intent that
// is not SENT, checked after its row lock is held. It reports whether it
// did.
func (e *Engine) repairTerminal(ctx context.Context, msgID int64, cutoff time.Time) (bool, error) {
	var repaired bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		b := lockBatch(msgID)
		procstate.QueueRepairIntent(b, msgID, e.clock.Now(), cutoff, func(ok bool) error {
			repaired = ok
			return nil
		})
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return false, fmt.Errorf("writing backfill intent of stranded message %d: %w", msgID, err)
	}
	return repaired, nil
}

// lockBatch starts a batch with the lock of msgID's proc_state row: the
// repair queued after it is a statement of its own, so its snapshot is
// taken once the lock is held and shows what the transaction that held
// the row before committed; both go in one round trip.
func lockBatch(msgID int64) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`SELECT 1 FROM proc_state WHERE msg_id=$1 FOR NO KEY UPDATE`, msgID)
	return b
}

// FindStranded is the self-check's dry run (R-N9): the messages
// RunSelfCheck would repair now, at most limit of each kind in msg_id
// order, repairing nothing.
func (e *Engine) FindStranded(ctx context.Context, limit int) (SelfCheckResult, error) {
	res := SelfCheckResult{Cutoff: e.clock.Now().Add(-e.selfCheckGrace())}
	for _, k := range []struct {
		cond string
		ids  *[]int64
	}{
		{stranded.AppliedWithoutProjection("$1"), &res.Applied},
		{stranded.TerminalWithoutIntent("$1"), &res.Terminal},
	} {
		rows, err := e.pool.Query(ctx, `SELECT ps.msg_id FROM proc_state ps WHERE `+k.cond+` ORDER BY ps.msg_id LIMIT $2`, res.Cutoff, limit)
		if err != nil {
			return res, fmt.Errorf("listing stranded messages: %w", err)
		}
		if *k.ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return res, fmt.Errorf("listing stranded messages: %w", err)
		}
	}
	return res, nil
}
