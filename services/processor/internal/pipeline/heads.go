package pipeline

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/lease"
)

// headsSQL reads the first $1 open messages at or above the floor $2, as
// long as the raw texts before each stay under $4 bytes (the first message
// is always read): a FIFO of large messages — a backlog of daily
// snapshots, up to the 10 MB message limit each — would otherwise load a
// whole batch of them, gigabytes, to execute one (R-J4). The raw of
// message $3, the daily snapshot whose reading the engine keeps between
// its steps (snapshot_memo.go), is not sent again at each step.
const headsSQL = `
	SELECT msg_id, state, attempts, next_attempt_at, processing_started_at, error_class,
		CASE WHEN msg_id = $3 THEN NULL ELSE raw END, executing_by, executing_through, trace_parent, trace_state
	FROM (
		SELECT p.*, sum(octet_length(p.raw)) OVER (ORDER BY p.msg_id) - octet_length(p.raw) AS raw_before
		FROM proc_state p WHERE p.state IN ('PENDING', 'FAILED') AND p.msg_id >= $2 ORDER BY p.msg_id LIMIT $1
	) h
	WHERE raw_before < $4 ORDER BY msg_id`

// headsRawBudget is $4 of headsSQL: a step reads at most about this much
// raw text beyond its first message. A batch of 1,024 FLOPs of a few
// kilobytes each stays within it.
const headsRawBudget = 8 << 20

// loadHeads returns up to n open messages from the FIFO head, in order,
// reading from the head floor (floor.go) and raising it to the head, and
// whether a replay request is pending (applyReplays): both reads go in one
// pipelined round trip, the executor's only one per step before its
// batch's (R-M2). It keeps the floor's generation for the raises of the
// writes that follow.
func (e *Engine) loadHeads(ctx context.Context, n int) (heads []*head, replays bool, err error) {
	if p := e.prefetched; p != nil {
		e.prefetched = nil
		// Read with the last batch's COMMIT (prefetchHeads) in this term.
		// An empty read is not taken: messages registered since then wait
		// behind no batch, so the step reads for itself. Nor is a read
		// below whose first head a message was registered since the last
		// batch read its heads (e.floorGen): the read started above that
		// batch and cannot hold it (R-B1).
		if len(p.heads) > 0 && p.term == e.db.Term() && !e.floor.loweredBelow(p.heads[0].MsgID, e.floorGen) {
			e.floorGen = p.gen
			e.floor.raise(p.heads[0].MsgID, p.gen)
			return p.heads, p.replays, nil
		}
	}
	floor, gen := e.floor.read()
	e.floorGen = gen
	b := &pgx.Batch{}
	var read headsRead
	e.queueHeads(b, n, floor, &read)
	if err := e.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, fmt.Errorf("loading FIFO head: %w", err)
	}
	if len(read.heads) > 0 {
		e.floor.raise(read.heads[0].MsgID, gen)
	}
	return read.heads, read.replays, nil
}

// queueHeads queues loadHeads' two reads, up to n heads from floor, into
// r.
func (e *Engine) queueHeads(b *pgx.Batch, n int, floor int64, r *headsRead) {
	kept, keptRaw := e.snapshots.kept()
	b.Queue(replaysPendingSQL).QueryRow(func(row pgx.Row) error { return row.Scan(&r.replays) })
	b.Queue(headsSQL, n, floor, kept, headsRawBudget).Query(func(rows pgx.Rows) (err error) {
		defer func() { r.read = err == nil }()
		r.heads, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*head, error) {
			var h head
			var raw *string
			err := row.Scan(&h.MsgID, &h.State, &h.Attempts, &h.NextAttemptAt, &h.ProcessingStartedAt, &h.ErrorClass, &raw, &h.ExecutingBy, &h.ExecutingThrough, &h.TraceParent, &h.TraceState)
			if raw != nil {
				h.Raw = *raw
			} else {
				h.Raw = keptRaw // proc_state.raw never changes once registered
			}
			return &h, err
		})
		return err
	})
}

// prefetchHeads queues, on a batch's transaction tx, the next step's
// heads from above the batch's last message (through), read after its
// COMMIT in the same round trip (lease.ReadAfterCommit): a step after a
// batch then reads nothing before its own (R-M2). The reads see the
// marker the hand-over wrote. done reports, once the transaction ended,
// what was read, nil when nothing was (the transaction did not commit, or
// could not take the reads): the next step reads for itself.
func (e *Engine) prefetchHeads(tx pgx.Tx, through int64) (done func() *headsRead) {
	floor, gen := e.floor.read()
	r := &headsRead{gen: gen, term: e.db.Term()}
	b := &pgx.Batch{}
	e.queueHeads(b, e.batchSize(), max(floor, through+1), r)
	if !lease.ReadAfterCommit(tx, b) {
		return func() *headsRead { return nil }
	}
	return func() *headsRead {
		if !r.read {
			return nil
		}
		return r
	}
}
