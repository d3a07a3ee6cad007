package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/procstate"
)

// ReplayableClasses are the error classes a replay may reopen (R-F1,
// seed 002 §6.1): failures that a new attempt can cure once the cause is
// fixed (a codec or handler gap, an outage, exhausted retries). MALFORMED
// and PROTOCOL messages are wrong in themselves and are never replayed.
// The control plane's preview applies the same list; this one decides.
var ReplayableClasses = []string{ClassCodec, ClassUnsupported, ClassInfra, ClassExhausted}

// ReplayResult is what applying one replay request did.
type ReplayResult struct {
	// RequestID is the applied replay_request.
	RequestID int64
	// Replayed are the messages moved back to PENDING.
	Replayed []int64
	// Refused are the requested messages that were no longer replayable.
	Refused []int64
}

// replaysPendingSQL tells whether an operator's replay request waits.
const replaysPendingSQL = `SELECT EXISTS (SELECT 1 FROM replay_request WHERE state='PENDING')`

// applyReplays applies every pending replay request, oldest first, each in
// its own transaction. It runs at the start of every Step, in the executor,
// so a replay never races the execution of a message: the executor is the
// single writer of proc_state.
func (e *Engine) applyReplays(ctx context.Context) ([]ReplayResult, error) {
	// One cheap indexed read per step; the transaction only when needed.
	var pending bool
	if err := e.pool.QueryRow(ctx, replaysPendingSQL).Scan(&pending); err != nil {
		return nil, fmt.Errorf("looking for replay requests: %w", err)
	}
	if !pending {
		return nil, nil
	}
	var out []ReplayResult
	for {
		r, err := e.applyOneReplay(ctx)
		if err != nil {
			return out, err
		}
		if r == nil {
			return out, nil
		}
		out = append(out, *r)
	}
}

// applyOneReplay applies the oldest pending replay request, or reports nil
// when none is pending.
func (e *Engine) applyOneReplay(ctx context.Context) (*ReplayResult, error) {
	var res *ReplayResult
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		var (
			id               int64
			ids              []int64
			operator, reason string
		)
		err := tx.QueryRow(ctx, `
			SELECT id, msg_ids, operator, reason FROM replay_request
			WHERE state='PENDING' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id, &ids, &operator, &reason)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading pending replay requests: %w", err)
		}
		now := e.clock.Now()
		replayed, err := procstate.WriteReplay(ctx, tx, procstate.Replay{RequestID: id, Operator: operator, Reason: reason,
			IDs: ids, Classes: ReplayableClasses, At: now})
		if err != nil {
			return err
		}
		refused := []int64{}
		for _, m := range ids {
			if _, found := slices.BinarySearch(replayed, m); !found {
				refused = append(refused, m)
			}
		}
		if _, err := tx.Exec(ctx, `
			UPDATE replay_request SET state='DONE', applied_at=$2, replayed=$3, refused=$4, refused_ids=$5 WHERE id=$1`,
			id, now, len(replayed), len(refused), refused); err != nil {
			return fmt.Errorf("closing replay request %d: %w", id, err)
		}
		res = &ReplayResult{RequestID: id, Replayed: replayed, Refused: refused}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res != nil && len(res.Replayed) > 0 {
		e.floor.lower(res.Replayed[0]) // open again, below the head perhaps (floor.go)
	}
	if res != nil {
		e.log.Info("replay applied", "request_id", res.RequestID, "replayed", len(res.Replayed), "refused", len(res.Refused),
			"msg_ids", res.Replayed, "refused_ids", res.Refused)
	}
	return res, nil
}
