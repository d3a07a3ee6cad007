package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/procstate"
)

// Ack is the value of a msgx.projection-acks record.
type Ack struct {
	FLID    int64 `json:"flid"`
	Version int64 `json:"version"`
}

// acksService consumes projection acks. Like the inbox, it consumes the
// partitions directly (no consumer group, so a restarted processor resumes
// at once instead of waiting out a group session) and stores its offsets in
// consumer_offset in the same transaction that applies the acks.
func (e *Engine) acksService() *lifecycle.Service {
	var cl *kgo.Client
	var own position // where the consumer stands (positions.go)
	topic := e.opt.Kafka.Topics.ProjectionAcks
	// open starts consuming at what consumer_offset holds.
	open := func(ctx context.Context) error {
		offsets, stored, err := e.resumeOffsets(ctx, "processor-acks", topic, false)
		if err != nil {
			return err
		}
		own = stored
		opts := append(e.opt.Kafka.ClientOpts(e.log, "processor-acks"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
			kgo.FetchMaxWait(500*time.Millisecond),
		)
		cl, err = kgo.NewClient(opts...)
		if err != nil {
			return fmt.Errorf("creating acks consumer: %w", err)
		}
		return nil
	}
	return lifecycle.NewService("processor-acks",
		open,
		func(ctx context.Context) error {
			wait := kafka.NewPollWait()
			var checked time.Time // the last idle position check
			for {
				fetches := poll(ctx, cl)
				if ctx.Err() != nil {
					return nil
				}
				if err := e.polled(ctx, e.loopProgress[1], wait, fetches); err != nil {
					return err
				}
				var acks []Ack
				next := map[int32]int64{}
				fetches.EachRecord(func(r *kgo.Record) {
					next[r.Partition] = r.Offset + 1
					var a Ack
					if err := json.Unmarshal(r.Value, &a); err != nil || a.FLID == 0 {
						e.log.Error("unreadable projection ack; ignored", "partition", r.Partition, "offset", r.Offset, "err", err)
						return
					}
					acks = append(acks, a)
				})
				var moved *positionMoved
				if len(next) == 0 {
					moved = e.idlePositionCheck(ctx, &checked, topic, own)
				} else {
					// Only the partitions of this fetch are checked and stored.
					mine := own.of(next)
					moved = e.storeUnlessMoved(ctx, "applying projection acks", func() error {
						return e.applyAcksFrom(ctx, acks, topic, next, mine)
					}) // nil when stopping too; the acks are consumed again after a restart
				}
				if ctx.Err() != nil {
					return nil
				}
				if moved != nil {
					cl.Close()
					if !e.followStored(ctx, "acks", moved, open) {
						cl = nil
						return nil // stopping
					}
					continue
				}
				for p, o := range next {
					own[p] = o
				}
			}
		},
		func(error) error {
			if cl != nil {
				cl.Close()
			}
			return nil
		})
}

// ApplyAcks removes the pending projections the acks satisfy — an ack of
// (FLID, v) satisfies every pending projection of FLID with version ≤ v —
// and moves every APPLIED message with nothing left pending to SUCCEEDED,
// writing its backfill intent in the same transaction (R-B7, INV-23).
func (e *Engine) ApplyAcks(ctx context.Context, acks []Ack) error {
	return e.applyAcks(ctx, acks, "", nil)
}

// applyAcks is ApplyAcks that also stores the consumer positions next
// (partition → next offset) of topic in the same transaction.
//
// The ack transaction and the executor serialise on the proc_state row of
// every message whose projections the acks satisfy (R-H4). Under READ
// COMMITTED each side would otherwise decide from the other's old state: a
// snapshot's last batch that wrote nothing reads its earlier batches'
// pending projections before the ack's deletion commits and marks the
// message APPLIED, while the ack, finding the message still PENDING, does
// not finish it — APPLIED with nothing pending, which no later ack reaches.
// So the ack transaction locks the rows first (in msg_id order, the
// executor holds at most one), deletes only the projections of messages it
// holds, and decides SUCCEEDED in a later statement, whose snapshot
// includes the executor's commit it waited for; the executor decides
// APPLIED under the same row lock (markApplied).
func (e *Engine) applyAcks(ctx context.Context, acks []Ack, topic string, next map[int32]int64) error {
	return e.applyAcksFrom(ctx, acks, topic, next, nil)
}

// applyAcksFrom is applyAcks by a consumer standing at own: it fails with
// *positionMoved, applying nothing, when a stored position of own's
// partitions is another (positions.go). A nil own checks nothing.
func (e *Engine) applyAcksFrom(ctx context.Context, acks []Ack, topic string, next map[int32]int64, own position) error {
	now := e.clock.Now()
	var done []procstate.SucceededAt
	parts := make([]int32, 0, len(next))
	offs := make([]int64, 0, len(next))
	for p, off := range next {
		parts, offs = append(parts, p), append(offs, off)
	}
	flids, versions := highestAcks(acks)
	var unlocked bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		done, unlocked = done[:0], false
		// Every partition's offset, the acks' plan settings and the first
		// lock of the acknowledged messages go in one round trip, the one
		// that begins the transaction; the SUCCEEDED states go with the
		// fence and COMMIT (R-M2).
		b := &pgx.Batch{}
		e.queuePositionCheck(b, topic, own)
		b.Queue(ackOffsetsSQL, e.opt.ConsumerName, topic, parts, offs, now)
		var locked []int64
		if len(acks) > 0 {
			b.Queue(ackPlanSettings)
			queueAckLock(b, flids, versions, nil, &locked)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("storing ack offsets: %w", err)
		}
		runHook(ctx, hookAcksLocked, tx, 0)
		if len(acks) == 0 {
			return nil
		}
		if len(locked) == 0 {
			return nil
		}
		// The deletion of the locked messages' satisfied projections and
		// their SUCCEEDED states (every locked message that is APPLIED with
		// nothing pending any more, with its backfill intent) go with the
		// fence and COMMIT: each a statement of its own, after the lock,
		// so each sees the executor's commit the lock waited for (R-H4).
		b = &pgx.Batch{}
		b.Queue(ackDeleteQuery, flids, versions, locked).QueryRow(func(r pgx.Row) error {
			var deleted []int64
			if err := r.Scan(&deleted, &unlocked); err != nil {
				return fmt.Errorf("deleting acknowledged projections: %w", err)
			}
			return nil
		})
		procstate.QueueSucceed(b, locked, now, nil, func(f []procstate.SucceededAt) error {
			done = f
			return nil
		})
		if err := lease.SendAtCommit(ctx, tx, b); err != nil {
			return fmt.Errorf("finishing acknowledged messages: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.metrics.acks.Add(ctx, int64(len(acks)))
	for _, f := range done {
		e.metrics.finished.Add(ctx, 1, stateAttr(StateSucceeded))
		e.metrics.stage(ctx, StageSucceeded, f.Applied, now)
		e.log.Info("message finished", "msg_id", f.MsgID, "state", StateSucceeded)
	}
	if unlocked {
		// The deletion saw satisfied projections of messages the lock did
		// not hold (written after the lock's snapshot): the same acks
		// again, in a transaction of their own, lock and finish those too
		// (acks are idempotent; the offsets are stored already).
		return e.applyAcks(ctx, acks, topic, nil)
	}
	return nil
}

// highestAcks returns the acks' flights, each once and in order, with the
// highest version acknowledged for it. An ack of (FLID, v) satisfies every
// pending projection of the flight up to v, so the highest one satisfies
// what all of them do. Probed one by one, the acks of a poll that caught
// up on a backlog — every version of every flight — found 1 + 2 + … + K
// projections of a flight with K pending instead of K, and the deletion
// held each of those against every message the transaction locked: a
// minute for 75,000 pending projections in a year-of-history run (R-M5),
// while the backlog grew behind it.
func highestAcks(acks []Ack) (flids, versions []int64) {
	highest := make(map[int64]int64, len(acks))
	for _, a := range acks {
		if v, seen := highest[a.FLID]; !seen || a.Version > v {
			highest[a.FLID] = a.Version
		}
	}
	flids = slices.Sorted(maps.Keys(highest))
	versions = make([]int64, len(flids))
	for i, f := range flids {
		versions[i] = highest[f]
	}
	return flids, versions
}

// The ack transaction's statements cost what the acknowledged batch costs,
// not what is pending or what was deleted before (issue 11, R-J5): each ack
// is one probe of projection_pending_flid_idx, each affected message one
// probe of proc_state's and projection_pending's primary keys. A join of
// the batch with projection_pending lets the planner hash the whole table
// instead — every pending projection of every message, and every dead
// tuple the deleted ones left behind until vacuum — once per ack batch: a
// snapshot of 10,000 flights acknowledged in small batches while ten such
// snapshots were pending took minutes. The probes are LATERAL subqueries
// with OFFSET 0, which the planner can neither flatten into a join nor
// reorder, so the plan is a nested loop over the acks whatever the
// statistics say. The DELETE joins the satisfied projections with the
// table by key, a join the planner would hash once the batch is large
// (thousands of a snapshot's acks in one poll): ackPlanSettings keeps it,
// and every other join of the ack transaction, a nested loop of probes.
// Without sequential scans too: with hash and merge joins off, a plan from
// statistics sampled while a large snapshot was pending may still put a
// sequential scan of projection_pending on the inside of the nested loop,
// once per satisfied projection (22 million rows read for 10,200 acks in
// one run of TestAcks_R_J5_CostIndependentOfOtherPendingProjections).

// ackPlanSettings turns hash joins, merge joins and sequential scans off
// for the rest of the ack transaction (set_config(…, true) is SET LOCAL: it
// ends with the transaction, the pooled connection keeps its settings),
// and plans its statements for their parameters (force_custom_plan): the
// deletion keeps the satisfied projections of the held messages by
// = ANY of their IDs, which PostgreSQL looks up in a hash table only when
// the array is a constant of the plan. Under the generic plan a prepared
// statement may get from its sixth run on, every row walked the array: a
// caught-up backlog of 50,000 projections took 14 s instead of 3
// (TestAcks_R_M5_R_J5_ABacklogsAcksCostWhatTheirProjectionsCost).
// ackOffsetsSQL stores the next offset of each partition ($3, $4) of the
// acks topic in one statement.
const ackOffsetsSQL = `INSERT INTO consumer_offset (consumer, topic, partition, next_offset, updated_at)
	SELECT $1, $2, p, o, $5 FROM unnest($3::int[], $4::bigint[]) AS u(p, o)
	ON CONFLICT (consumer, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = EXCLUDED.updated_at`

const ackPlanSettings = `SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), set_config('enable_seqscan', 'off', true),
	set_config('plan_cache_mode', 'force_custom_plan', true)`

// ackLockQuery locks, in msg_id order, the proc_state rows of the messages
// not in $3 that have a pending projection the acks ($1 flids, $2
// versions) satisfy.
const ackLockQuery = `
SELECT ps.msg_id FROM proc_state ps
WHERE ps.msg_id = ANY (ARRAY(
        SELECT p.msg_id
        FROM unnest($1::bigint[], $2::bigint[]) AS a(flid, version)
        CROSS JOIN LATERAL (
                SELECT p.msg_id FROM projection_pending p
                WHERE p.flid = a.flid AND p.version <= a.version
                OFFSET 0) p
        WHERE p.msg_id <> ALL ($3::bigint[])))
ORDER BY ps.msg_id
FOR NO KEY UPDATE OF ps`

// ackDeleteQuery deletes the pending projections of the locked messages
// ($3) that the acks satisfy and returns the messages it deleted
// projections of, and whether a satisfied projection of a message not
// locked was seen. The satisfied projections are found once (s, one probe
// per ack) and deleted by their key.
const ackDeleteQuery = `
WITH s AS (
	SELECT p.msg_id, p.flid, a.version
	FROM unnest($1::bigint[], $2::bigint[]) AS a(flid, version)
	CROSS JOIN LATERAL (
	        SELECT p.msg_id, p.flid FROM projection_pending p
	        WHERE p.flid = a.flid AND p.version <= a.version
	        OFFSET 0) p),
d AS (
	DELETE FROM projection_pending p USING s
	WHERE s.msg_id = ANY ($3::bigint[]) AND p.msg_id = s.msg_id AND p.flid = s.flid AND p.version <= s.version
	RETURNING p.msg_id)
SELECT ARRAY(SELECT DISTINCT msg_id FROM d),
       EXISTS (SELECT 1 FROM s WHERE s.msg_id <> ALL ($3::bigint[]))`

// queueAckLock queues ackLockQuery: it locks the messages of the acks'
// satisfied projections not in locked yet and puts them in *more.
func queueAckLock(b *pgx.Batch, flids, versions, locked []int64, more *[]int64) {
	if locked == nil {
		locked = []int64{}
	}
	b.Queue(ackLockQuery, flids, versions, locked).Query(func(rows pgx.Rows) error {
		var err error
		*more, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("locking acknowledged messages: %w", err)
		}
		return nil
	})
}

// txHook is a point inside a transaction where a test runs a concurrent
// transaction, to force one interleaving of the executor and the ack
// consumer deterministically (R-H4). Hooks travel in the context, so tests
// running in parallel never share one; production contexts carry none and
// the cost is one context lookup.
type txHook func(ctx context.Context, tx pgx.Tx, msgID int64)

// hookPoint names where a txHook runs.
type hookPoint int

const (
	// hookApplied runs in markApplied after the message was marked APPLIED,
	// before its transaction commits.
	hookApplied hookPoint = iota
	// hookAcksLocked runs in applyAcks after the acknowledged messages
	// were locked, before their projections are deleted.
	hookAcksLocked
)

// runHook calls the hook the context carries for p, if any.
func runHook(ctx context.Context, p hookPoint, tx pgx.Tx, msgID int64) {
	if h, ok := ctx.Value(p).(txHook); ok {
		h(ctx, tx, msgID)
	}
}
