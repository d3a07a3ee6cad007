package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/clip"
	"msgexchange/libs/kafka"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/procstate"
)

// inboxService consumes partition 0 of msgx.inbox from the offset stored in
// consumer_offset (from the partition's start when the broker lost that
// position, brokerloss.go) and registers every record in proc_state.
func (e *Engine) inboxService() *lifecycle.Service {
	var cl *kgo.Client
	var own position // where the consumer stands (positions.go)
	topic := e.opt.Kafka.Topics.Inbox
	// open starts consuming at what consumer_offset holds.
	open := func(ctx context.Context) error {
		offsets, stored, err := e.resumeOffsets(ctx, "processor-inbox", topic, true)
		if err != nil {
			return err
		}
		own = stored
		opts := append(e.opt.Kafka.ClientOpts(e.log, "processor-inbox"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
			kgo.FetchMaxWait(500*time.Millisecond),
		)
		cl, err = kgo.NewClient(opts...)
		if err != nil {
			return fmt.Errorf("creating inbox consumer: %w", err)
		}
		e.log.Info("consuming inbox", "topic", topic, "offset", offsets[0])
		return nil
	}
	return lifecycle.NewService("processor-inbox",
		open,
		func(ctx context.Context) error {
			wait := kafka.NewPollWait()
			var checked time.Time // the last idle position check
			for {
				fetches := poll(ctx, cl)
				if ctx.Err() != nil {
					return nil
				}
				if err := e.polled(ctx, e.loopProgress[0], wait, fetches); err != nil {
					return err
				}
				var recs []*kgo.Record
				fetches.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
				var moved *positionMoved
				if len(recs) == 0 {
					moved = e.idlePositionCheck(ctx, &checked, topic, own)
				} else {
					moved = e.storeUnlessMoved(ctx, "registering inbox records", func() error {
						return e.registerFrom(ctx, topic, recs, own)
					})
				}
				if ctx.Err() != nil {
					return nil
				}
				if moved != nil {
					cl.Close()
					if !e.followStored(ctx, "inbox", moved, open) {
						cl = nil
						return nil // stopping
					}
					continue
				}
				if len(recs) == 0 {
					continue
				}
				own[0] = recs[len(recs)-1].Offset + 1
				e.Wake()
			}
		},
		func(error) error {
			if cl != nil {
				cl.Close()
			}
			return nil
		})
}

// register stores each record once (INV-9) and the consumer position in one
// transaction (R-B2). A mailbox ID seen before with the same text (a
// republish) is ignored; with a different text (the mailbox reused the ID,
// R-L5) that text is held for an operator (holdReused). An ID whose
// shadowed record the cleanup deleted is finished SKIPPED, not executed
// again (R-L6, procstate.QueueRegister); the transaction holds the cleanup
// lock shared, so a cleanup deleting that record meanwhile cannot make it
// look new (cleanupLock).
// The records of a fetch are inserted by one multi-row statement, not one
// statement each: a fetch holds hundreds of records, and PostgreSQL's cost
// per statement was the larger part of registering them.
func (e *Engine) register(ctx context.Context, topic string, recs []*kgo.Record) error {
	return e.registerFrom(ctx, topic, recs, nil)
}

// registerFrom is register by a consumer standing at own: the
// registration fails with *positionMoved, registering nothing, when the
// stored position is another (positions.go). A nil own checks nothing.
func (e *Engine) registerFrom(ctx context.Context, topic string, recs []*kgo.Record, own position) error {
	now := e.clock.Now()
	n := 0
	var arrivals []*time.Time // receive times of the records this transaction registered
	var dead []int64          // records registered DEAD(MALFORMED): not storable text
	var reused []reusedText   // mailbox IDs seen again with a different text
	var cleaned []int64       // IDs of cleaned shadowed records, finished SKIPPED (R-L6)
	spans := e.traceRegistration(ctx, recs)
	var lowest int64 // the smallest mailbox ID of the records, 0 for none
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		lowest, n = 0, 0
		arrivals, dead, reused, cleaned = arrivals[:0], dead[:0], reused[:0], cleaned[:0] // a retried transaction starts over
		b := &pgx.Batch{}
		// First, so that every later statement's snapshot sees a cleanup
		// that committed before it and none runs until this commits.
		b.Queue(cleanupLockShared, cleanupLockKey)
		// Then the consumer's position, before anything is registered.
		e.queuePositionCheck(b, topic, own)
		// Rows of the multi-row insert; a mailbox ID twice in one fetch is
		// registered from its first record, as a later fetch's would be.
		var rows []procstate.Register
		seen := map[int64]bool{}
		received := map[int64]*time.Time{}
		var again reusedCandidates // records of IDs registered before this record
		for _, r := range recs {
			id, err := strconv.ParseInt(string(r.Key), 10, 64)
			if err != nil || id <= 0 {
				e.log.Error("inbox record without a mailbox ID key; skipped", "offset", r.Offset, "key", clip.N(string(r.Key), 256))
				continue
			}
			if lowest == 0 || id < lowest {
				lowest = id
			}
			n++
			var at *time.Time
			for _, h := range r.Headers {
				if h.Key == "msgx-received-at" {
					if t, err := time.Parse(time.RFC3339Nano, string(h.Value)); err == nil {
						at = &t
					}
				}
			}
			if seen[id] {
				if text, ok := storableText(r.Value); ok {
					again.add(id, text, at, r.Offset)
				}
				continue
			}
			seen[id] = true
			received[id] = at
			if text, ok := storableText(r.Value); !ok {
				// PostgreSQL text cannot hold these bytes; such input is not
				// XML (NUL) or not text at all, so it is MALFORMED at once —
				// registered, finished and given its backfill intent in one
				// statement — instead of blocking every later record.
				procstate.QueueRegisterDead(b, procstate.Register{MsgID: id, Raw: text, ReceivedAt: at, Offset: r.Offset},
					unstorableReason, now, func(inserted bool) error {
						if inserted {
							arrivals, dead = append(arrivals, received[id]), append(dead, id)
						}
						return nil
					})
				continue
			}
			tp, ts := spans.traceParent(r) // continued by the execution (R-I4)
			rows = append(rows, procstate.Register{MsgID: id, Raw: string(r.Value), ReceivedAt: at, Offset: r.Offset, TraceParent: tp, TraceState: ts})
		}
		inserted := map[int64]bool{}
		if len(rows) > 0 {
			// A republished mailbox ID inserts nothing: not a registration.
			procstate.QueueRegister(b, rows, now, func(ids, gone []int64) error {
				for _, id := range ids {
					arrivals = append(arrivals, received[id])
					inserted[id] = true
				}
				for _, id := range gone {
					inserted[id] = true // finished, not a republish of a registered record
				}
				cleaned = append(cleaned, gone...)
				return nil
			})
		}
		// The position, with the leader epoch of the last record read
		// (brokerloss.go).
		last := recs[len(recs)-1]
		b.Queue(`INSERT INTO consumer_offset (consumer, topic, partition, next_offset, updated_at, leader_epoch, epoch_next_offset)
		         VALUES ($1, $2, 0, $3, $4, $5, $3)
		         ON CONFLICT (consumer, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = EXCLUDED.updated_at,
		             leader_epoch = EXCLUDED.leader_epoch, epoch_next_offset = EXCLUDED.epoch_next_offset`,
			e.opt.ConsumerName, topic, last.Offset+1, now, last.LeaderEpoch)
		// The registrations' callbacks run as the batch is read.
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("registering inbox records: %w", err)
		}
		for _, r := range rows {
			if !inserted[r.MsgID] {
				again.add(r.MsgID, r.Raw, r.ReceivedAt, r.Offset)
			}
		}
		if err := e.reopenUnmarked(ctx, tx, again, now); err != nil {
			return err
		}
		var err error
		reused, err = e.holdReused(ctx, tx, again, now)
		return err
	})
	spans.end(err)
	if err == nil && lowest > 0 {
		// After the commit, so that a head query that missed the rows
		// cannot raise the floor past them (floor.go).
		e.floor.lower(lowest)
	}
	if err == nil {
		e.metrics.registered.Add(ctx, int64(n))
		for _, t := range arrivals {
			e.metrics.stage(ctx, StageInbox, t, now)
		}
		for _, id := range dead {
			e.metrics.finished.Add(ctx, 1, stateAttr(StateDead))
			e.reportDead(ctx, id, ClassMalformed, unstorableReason, "stage", "registration")
		}
		e.reportReused(ctx, reused)
		e.reportCleanedRepublished(ctx, cleaned)
	}
	return err
}

// reportCleanedRepublished counts and logs, after their registration
// committed, the records finished SKIPPED because the cleanup had deleted
// their shadowed record (R-L6): one line per fetch, since leaving shadow
// mode after a long run may bring many at once.
func (e *Engine) reportCleanedRepublished(ctx context.Context, ids []int64) {
	if len(ids) == 0 {
		return
	}
	e.metrics.finished.Add(ctx, int64(len(ids)), stateAttr(StateSkipped))
	e.metrics.cleanedRepublished.Add(ctx, int64(len(ids)))
	e.log.WarnContext(ctx, "mailbox rows published again after the record cleanup deleted their shadowed records; finished SKIPPED without executing them again",
		"count", len(ids), "first_msg_id", slices.Min(ids), "last_msg_id", slices.Max(ids))
}

// unstorableReason is the reason of a record registered DEAD(MALFORMED)
// because PostgreSQL text cannot hold it.
const unstorableReason = "raw message is not valid UTF-8 text or contains NUL bytes"

// storableText reports whether raw can be stored as PostgreSQL text, and
// otherwise returns a readable replacement (invalid sequences and NUL bytes
// shown as U+FFFD) for operators to inspect.
func storableText(raw []byte) (string, bool) {
	if utf8.Valid(raw) && bytes.IndexByte(raw, 0) < 0 {
		return string(raw), true
	}
	return strings.ReplaceAll(strings.ToValidUTF8(string(raw), "\uFFFD"), "\x00", "\uFFFD"), false
}
