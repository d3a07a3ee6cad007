package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/lifecycle"
)

type outboxRow struct {
	ID       int64
	Key      string
	Payload  []byte
	Headers  []byte
	Attempts int
	// Created is when the intent was written (the message applied).
	Created time.Time
}

// kafkaService relays one target's rows to topic.
func (r *Relay) kafkaService(target, topic string) *lifecycle.Service {
	var cl *kgo.Client
	return lifecycle.NewService("dispatcher-"+target,
		func(context.Context) error {
			var err error
			cl, err = kgo.NewClient(r.producerOpts(target,
				kgo.DefaultProduceTopic(topic),
				kgo.ProducerBatchMaxBytes(16<<20),
				kgo.MaxBufferedRecords(2*r.opt.Batch+100),
			)...)
			if err != nil {
				return fmt.Errorf("creating producer for %s: %w", target, err)
			}
			return nil
		},
		func(ctx context.Context) error {
			return r.loop(ctx, target, func(ctx context.Context) (bool, error) { return r.drainKafka(ctx, cl, target) })
		},
		func(error) error {
			if cl != nil {
				cl.Close()
			}
			return nil
		})
}

// drainKafka relays one batch. It reports whether a full batch was read
// (so more may be waiting).
func (r *Relay) drainKafka(ctx context.Context, cl *kgo.Client, target string) (bool, error) {
	now := r.opt.Clock.Now()
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A row is held back while an older row of the same key waits in backoff,
	// so one key's rows are delivered in order (per-FLID order).
	rows, err := r.reads.Query(qctx, `
		SELECT o.id, o.pkey, o.payload, o.headers, o.attempts, o.created_at FROM outbox o
		WHERE o.target=$1 AND o.state='PENDING' AND o.next_attempt_at <= $2
		  AND NOT EXISTS (SELECT 1 FROM outbox b WHERE b.target=o.target AND b.pkey=o.pkey
		                  AND b.state='PENDING' AND b.id < o.id AND b.next_attempt_at > $2)
		ORDER BY o.id LIMIT $3`, target, now, r.opt.Batch)
	if err != nil {
		return false, fmt.Errorf("reading outbox: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (outboxRow, error) {
		var o outboxRow
		err := row.Scan(&o.ID, &o.Key, &o.Payload, &o.Headers, &o.Attempts, &o.Created)
		return o, err
	})
	if err != nil {
		return false, fmt.Errorf("reading outbox: %w", err)
	}
	if len(batch) == 0 {
		return false, nil
	}
	recs := make([]*kgo.Record, len(batch))
	for i, o := range batch {
		rec := &kgo.Record{Key: []byte(o.Key), Value: o.Payload}
		if len(o.Headers) > 0 {
			var hs map[string]string
			if err := json.Unmarshal(o.Headers, &hs); err == nil {
				for k, v := range hs {
					rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
				}
			}
		}
		recs[i] = rec
	}
	// The term must be current before anything leaves for Kafka; from here
	// on every write is fenced, and a refusal ends the term (R-H6).
	if err := r.db(target).Check(ctx); err != nil {
		return false, err
	}
	ids := make([]int64, len(batch))
	for i, o := range batch {
		ids[i] = o.ID
	}
	spans := r.traceRecords(ctx, target, ids, recs) // the message's trace (R-I4)
	pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
	results, restart := produceTx(pctx, cl, recs) // all or nothing; fenced at the broker too
	pcancel()
	spans.end(results)
	var sent []int64
	var created []time.Time // of the sent rows
	failedKeys := map[string]bool{}
	var failed []outboxRow
	var lastErr error
	for i, res := range results {
		o := batch[i]
		// Once a key failed in this batch, its later rows are retried after
		// it even if they were delivered, so that the last delivery of every
		// key is in order.
		if res.Err != nil || failedKeys[o.Key] {
			failedKeys[o.Key] = true
			failed = append(failed, o)
			if res.Err != nil {
				lastErr = res.Err
			}
			continue
		}
		sent = append(sent, o.ID)
		created = append(created, o.Created)
	}
	done := r.opt.Clock.Now()
	if err := r.markDelivered(ctx, target, sent, done); err != nil {
		return false, err
	}
	for _, c := range created {
		r.stage(ctx, StageProduced, target, c, done)
	}
	for _, o := range failed {
		if err := r.fail(ctx, target, o, lastErr, done); err != nil {
			return false, err
		}
	}
	if restart != nil {
		return false, restart
	}
	if len(failed) > 0 {
		return false, fmt.Errorf("producing %d of %d records to %s: %w", len(failed), len(batch), target, lastErr)
	}
	return len(batch) == r.opt.Batch, nil
}

// markDelivered records rows as delivered.
func (r *Relay) markDelivered(ctx context.Context, target string, ids []int64, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := r.db(target).Exec(ctx, `UPDATE outbox SET state='SENT', sent_at=$2, attempts=attempts+1 WHERE id = ANY($1) AND state='PENDING'`, ids, now); err != nil {
		return fmt.Errorf("marking outbox rows sent: %w", err)
	}
	r.sent.Add(ctx, int64(len(ids)), targetAttr(target))
	return nil
}

// fail records a failed delivery: backoff, or DEAD when attempts run out.
func (r *Relay) fail(ctx context.Context, target string, o outboxRow, cause error, now time.Time) error {
	attempts := o.Attempts + 1
	msg := "not delivered"
	if cause != nil {
		msg = cause.Error()
	}
	r.failed.Add(ctx, 1, targetAttr(target))
	if attempts >= r.opt.MaxAttempts {
		r.dead.Add(ctx, 1, targetAttr(target))
		r.log.Error("outbox row is DEAD (dead-letter)", "target", target, "outbox_id", o.ID, "key", o.Key, "attempts", attempts, "err", msg)
		_, err := r.db(target).Exec(ctx, `UPDATE outbox SET state='DEAD', attempts=$2, last_error=$3 WHERE id=$1 AND state='PENDING'`, o.ID, attempts, msg)
		if err != nil {
			return fmt.Errorf("marking outbox row dead: %w", err)
		}
		return nil
	}
	next := now.Add(backoff(attempts, r.opt.BackoffMin, r.opt.BackoffMax))
	_, err := r.db(target).Exec(ctx, `UPDATE outbox SET attempts=$2, last_error=$3, next_attempt_at=$4 WHERE id=$1 AND state='PENDING'`, o.ID, attempts, msg, next)
	if err != nil {
		return fmt.Errorf("recording delivery failure: %w", err)
	}
	return nil
}
