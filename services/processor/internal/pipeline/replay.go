package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
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

// applyReplays applies every pending replay request, oldest first, each in
// its own transaction. It runs at the start of every Step, in the executor,
// so a replay never races the execution of a message: the executor is the
// single writer of proc_state.
func (e *Engine) applyReplays(ctx context.Context) ([]ReplayResult, error) {
	// One cheap indexed read per step; the transaction only when needed.
	var pending bool
	if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM replay_request WHERE state='PENDING')`).Scan(&pending); err != nil {
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
		// Re-check the whitelist under the row locks: the message may have
		// been replayed, executed or cleaned up since the request was made.
		// The identity key is kept, so the replayed message is never its own
		// duplicate (R-B4); finished_at and backfilled_at are cleared because
		// the message is open again and will get a new terminal state and a
		// new backfill intent.
		rows, err := tx.Query(ctx, `
			WITH old AS (
				SELECT msg_id, state, error_class, attempts, reason FROM proc_state
				WHERE msg_id = ANY($1) AND state IN ('FAILED', 'DEAD') AND error_class = ANY($2)
				FOR UPDATE
			), upd AS (
				UPDATE proc_state p SET state='PENDING', error_class=NULL, reason=$3, attempts=0,
					next_attempt_at=NULL, processing_started_at=NULL, executing_by=NULL, executing_through=NULL, finished_at=NULL, backfilled_at=NULL, updated_at=$4
				FROM old WHERE p.msg_id = old.msg_id
				RETURNING p.msg_id
			), aud AS (
				INSERT INTO replay_audit (msg_id, request_id, operator, reason, previous_state, previous_class, previous_attempts, previous_reason, at)
				SELECT msg_id, $5, $6, $7, state, error_class, attempts, reason, $4 FROM old
			)
			SELECT msg_id FROM upd ORDER BY msg_id`,
			ids, ReplayableClasses, "replayed by request "+strconv.FormatInt(id, 10), now, id, operator, reason)
		if err != nil {
			return fmt.Errorf("replaying messages of request %d: %w", id, err)
		}
		replayed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("replaying messages of request %d: %w", id, err)
		}
		// An undelivered backfill intent of the earlier outcome must not mark
		// the mailbox row while the message is open again (R-B6): it is
		// withdrawn, and the next terminal state writes a new one. A marker
		// already written stays (INV-7).
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE target=$1 AND msg_id = ANY($2) AND state IN ('PENDING', 'DEAD')`,
			TargetMailbox, replayed); err != nil {
			return fmt.Errorf("withdrawing backfill intents of request %d: %w", id, err)
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
