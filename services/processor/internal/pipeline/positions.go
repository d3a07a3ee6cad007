package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/backoff"
)

// A consumer's stored position (consumer_offset) is written only by the
// consumer itself, in the transaction that takes the effects of the records
// before it (R-B2), so what is stored is always what the consumer stored
// last. When it is not, PostgreSQL has lost commits the consumer saw
// succeed — a failover to an asynchronous replica that lagged, a restore
// to an earlier point — or another instance consumed in between. Either
// way the records after the stored position must be consumed again from
// there: their effects are gone from PostgreSQL, while their mailbox rows
// may be marked already (the marker was written after the lost commit), so
// nothing else would ever publish them again, and a consumer that went on
// from its own position would leave them lost for good — or, for a row
// ingest republished because it was still unmarked, executed after
// messages above it (docs/reliability.md, "A failover to a replica that
// lagged").

// position is where a consumer stands on each partition it consumes: the
// next offset as it stored it last in consumer_offset, -1 when nothing was
// stored.
type position map[int32]int64

// positionMoved is the error of a transaction that found a partition's
// stored position other than the consumer's own.
type positionMoved struct {
	topic     string
	partition int32
	stored    int64 // -1: none stored
	own       int64 // -1: none stored when the consumer began
}

func (p *positionMoved) Error() string {
	return fmt.Sprintf("consumer_offset holds %s of %s partition %d, where this consumer stored %s: PostgreSQL lost commits (a failover to a replica behind, a restore) or another instance consumed meanwhile",
		offsetText(p.stored), p.topic, p.partition, offsetText(p.own))
}

func offsetText(o int64) string {
	if o < 0 {
		return "no position"
	}
	return fmt.Sprintf("offset %d", o)
}

// storedPositions reads the stored positions of topic's partitions.
func (e *Engine) storedPositions(ctx context.Context, topic string) (position, error) {
	pos, _, err := e.storedPositionsAndEpochs(ctx, topic)
	return pos, err
}

// storedPositionsAndEpochs reads the stored positions of topic's
// partitions and, by partition, the leader epoch stored with a position
// (migration 00040) where it still holds: it was stored with the position
// that is stored now, not one a writer that does not know the epoch (the
// previous release, during a rolling upgrade) moved since.
func (e *Engine) storedPositionsAndEpochs(ctx context.Context, topic string) (position, map[int32]int32, error) {
	rows, err := e.pool.Query(ctx, `SELECT partition, next_offset,
		CASE WHEN leader_epoch >= 0 AND epoch_next_offset = next_offset THEN leader_epoch END
		FROM consumer_offset WHERE consumer=$1 AND topic=$2`, e.opt.ConsumerName, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the positions on %s: %w", topic, err)
	}
	pos, epochs := position{}, map[int32]int32{}
	var p int32
	var next int64
	var ep *int32
	if _, err := pgx.ForEachRow(rows, []any{&p, &next, &ep}, func() error {
		pos[p] = next
		if ep != nil {
			epochs[p] = *ep
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("loading the positions on %s: %w", topic, err)
	}
	return pos, epochs, nil
}

// scanPositions reads rows of (partition, next_offset) and closes them.
func scanPositions(rows pgx.Rows) (position, error) {
	pos := position{}
	var p int32
	var next int64
	_, err := pgx.ForEachRow(rows, []any{&p, &next}, func() error {
		pos[p] = next
		return nil
	})
	return pos, err
}

// movedFrom compares the stored positions with own: the first partition
// whose stored position differs, one stored that own does not know
// included; nil when none does.
func (own position) movedFrom(topic string, stored position) *positionMoved {
	for p, o := range own {
		s, ok := stored[p]
		if !ok {
			s = -1
		}
		if s != o {
			return &positionMoved{topic: topic, partition: p, stored: s, own: o}
		}
	}
	for p, s := range stored {
		if _, ok := own[p]; !ok {
			return &positionMoved{topic: topic, partition: p, stored: s, own: -1}
		}
	}
	return nil
}

// of returns own restricted to the partitions of next, -1 for one it
// does not know.
func (own position) of(next map[int32]int64) position {
	out := make(position, len(next))
	for p := range next {
		if o, ok := own[p]; ok {
			out[p] = o
		} else {
			out[p] = -1
		}
	}
	return out
}

// queuePositionCheck queues, before the statement that stores the new
// positions, the read of the stored positions of own's partitions, locked
// until the transaction ends; the batch fails with *positionMoved when one
// differs from own. An empty own checks nothing.
func (e *Engine) queuePositionCheck(b *pgx.Batch, topic string, own position) {
	if len(own) == 0 {
		return
	}
	parts := make([]int32, 0, len(own))
	for p := range own {
		parts = append(parts, p)
	}
	b.Queue(`SELECT partition, next_offset FROM consumer_offset
		WHERE consumer=$1 AND topic=$2 AND partition = ANY($3::int[]) FOR UPDATE`,
		e.opt.ConsumerName, topic, parts).Query(func(rows pgx.Rows) error {
		stored, err := scanPositions(rows)
		if err != nil {
			return fmt.Errorf("reading the stored positions on %s: %w", topic, err)
		}
		if moved := own.movedFrom(topic, stored); moved != nil {
			return moved
		}
		return nil
	})
}

// positionCheckIdle is how often an idle consumer compares the stored
// position with its own: a consumer that gets no records stores nothing,
// so without the comparison a failover while the topic is quiet would be
// found only at its next record — and the records it lost may be what the
// next ones wait for.
const positionCheckIdle = time.Second

// idlePositionCheck compares, at most once per positionCheckIdle (last is
// when it last did), the stored positions of topic with own and returns
// the first that moved. A failed read finds nothing: the next check or
// the next stored position finds it.
func (e *Engine) idlePositionCheck(ctx context.Context, last *time.Time, topic string, own position) *positionMoved {
	now := e.clock.Now()
	if now.Sub(*last) < positionCheckIdle {
		return nil
	}
	*last = now
	stored, err := e.storedPositions(ctx, topic)
	if err != nil {
		return nil
	}
	return own.movedFrom(topic, stored)
}

// storeUnlessMoved runs store — a transaction that stores a consumer's
// position with what it consumed — until it succeeds; a database outage
// pauses the consumer (the records stay in Kafka) until PostgreSQL answers
// again. It returns the move when store found the stored position moved
// (nothing was stored then), nil on success or when ctx ended.
func (e *Engine) storeUnlessMoved(ctx context.Context, what string, store func() error) *positionMoved {
	var moved *positionMoved
	_ = backoff.Retry(ctx, backoff.New(100*time.Millisecond, 5*time.Second), func() error {
		err := store()
		if moved = asPositionMoved(err); moved != nil {
			return nil
		}
		return err
	}, func(err error, wait time.Duration) {
		e.log.Warn(what+"; retrying", "err", err, "retry_in", wait)
	})
	return moved
}

// followStored logs and counts moved, then runs reopen — which opens the
// consumer again at the stored positions — until it succeeds. It returns
// false when ctx ended first. The records after the stored position are
// consumed again: registering and applying them twice is harmless (INV-9,
// acks are idempotent).
func (e *Engine) followStored(ctx context.Context, consumer string, moved *positionMoved, reopen func(context.Context) error) bool {
	e.log.Error("the "+consumer+" position in PostgreSQL is not where this consumer stored it; consuming again from the stored one",
		"err", moved, "topic", moved.topic)
	e.metrics.positionMoved.Add(ctx, 1, topicAttr(moved.topic))
	return backoff.Retry(ctx, backoff.New(100*time.Millisecond, 5*time.Second), func() error { return reopen(ctx) },
		func(err error, wait time.Duration) {
			e.log.Warn("reopening the "+consumer+" consumer; retrying", "err", err, "retry_in", wait)
		}) == nil
}

// asPositionMoved returns err's *positionMoved, nil when it is none.
func asPositionMoved(err error) *positionMoved {
	var m *positionMoved
	if errors.As(err, &m) {
		return m
	}
	return nil
}
