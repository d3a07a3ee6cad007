package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	rows, err := e.pool.Query(ctx, `SELECT partition, next_offset FROM consumer_offset WHERE consumer=$1 AND topic=$2`, e.opt.ConsumerName, topic)
	if err != nil {
		return nil, fmt.Errorf("loading the positions on %s: %w", topic, err)
	}
	defer rows.Close()
	pos := position{}
	for rows.Next() {
		var p int32
		var next int64
		if err := rows.Scan(&p, &next); err != nil {
			return nil, fmt.Errorf("loading the positions on %s: %w", topic, err)
		}
		pos[p] = next
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("loading the positions on %s: %w", topic, err)
	}
	return pos, nil
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
		stored := position{}
		for rows.Next() {
			var p int32
			var next int64
			if err := rows.Scan(&p, &next); err != nil {
				return fmt.Errorf("reading the stored positions on %s: %w", topic, err)
			}
			stored[p] = next
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reading the stored positions on %s: %w", topic, err)
		}
		for _, p := range parts {
			s, ok := stored[p]
			if !ok {
				s = -1
			}
			if s != own[p] {
				return &positionMoved{topic: topic, partition: p, stored: s, own: own[p]}
			}
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

// asPositionMoved returns err's *positionMoved, nil when it is none.
func asPositionMoved(err error) *positionMoved {
	var m *positionMoved
	if errors.As(err, &m) {
		return m
	}
	return nil
}
