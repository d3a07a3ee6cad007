package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
)

// Outcomes of schd rows, recorded in outbox.outcome.
const (
	// OutcomeProduced marks the row whose state was produced for its FLID.
	OutcomeProduced = "produced"
	// OutcomeCoalesced marks an older row of a FLID whose newer row was
	// produced in the same flush: the record represents it.
	OutcomeCoalesced = "coalesced"
	// OutcomeSuperseded marks rows never produced because a newer state of
	// their FLID had already been delivered (a re-queued or late row).
	OutcomeSuperseded = "superseded"
)

// FlushResult reports what one schd flush did.
type FlushResult struct {
	// Records is the number of records produced, one per FLID.
	Records int
	// Tombstones is how many of those records have a null value (deleted
	// flights).
	Tombstones int
	// RowsSent is the number of outbox rows marked SENT, the produced rows
	// and every older pending row of their FLIDs.
	RowsSent int
	// Superseded is the number of FLIDs skipped because a newer state of
	// theirs had already been delivered.
	Superseded int
	// Full reports that the flush reached flush-limit, so more FLIDs may be
	// waiting for the next flush.
	Full bool
}

// Schd relays the schd target: every flush it produces the latest pending
// state of each changed FLID, one record per FLID, and marks every pending
// row that record represents as SENT in one statement (R-D1).
type Schd struct {
	r  *Relay
	cl *kgo.Client
}

// NewSchd returns the schd relay producing through cl to the schd topic of
// the relay's Kafka configuration. The caller owns cl.
func (r *Relay) NewSchd(cl *kgo.Client) *Schd { return &Schd{r: r, cl: cl} }

// schdService runs a flush every SchdFlushPeriod with its own producer, so
// a failing schd target never holds up the other targets (R-D2).
func (r *Relay) schdService() *lifecycle.Service {
	var s *Schd
	return lifecycle.NewService("dispatcher-"+TargetSchd,
		func(context.Context) error {
			cl, err := kgo.NewClient(r.producerOpts(TargetSchd,
				kgo.DefaultProduceTopic(r.opt.Kafka.Topics.Schd),
				kgo.MaxBufferedRecords(r.opt.SchdFlushLimit+100),
			)...)
			if err != nil {
				return fmt.Errorf("creating producer for %s: %w", TargetSchd, err)
			}
			s = r.NewSchd(cl)
			return nil
		},
		func(ctx context.Context) error { return s.run(ctx) },
		func(error) error {
			if s != nil {
				s.cl.Close()
			}
			return nil
		})
}

// run flushes at once and then every flush period until ctx ends. A full
// flush does not flush again before the period is over: flush-limit bounds
// what one period sends.
func (s *Schd) run(ctx context.Context) error {
	t := time.NewTicker(s.r.opt.SchdFlushPeriod)
	defer t.Stop()
	for {
		res, err := s.FlushOnce(ctx)
		if ctx.Err() != nil {
			// Shutting down, or the term ended (see Relay.loop).
			return nil
		}
		if errors.Is(err, lease.ErrFenced) || errors.Is(err, errProducerRestart) {
			return err
		}
		if err != nil {
			s.r.log.Warn("flushing schd", "err", err)
		} else if res.Full {
			s.r.log.Info("schd flush reached its limit; the rest follows in the next flush", "records", res.Records, "flush_limit", s.r.opt.SchdFlushLimit)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// schdLatest is the latest pending row of one FLID.
type schdLatest struct {
	ID         int64
	Key        string
	Payload    []byte
	Headers    []byte
	Superseded bool
}

// schdSelect picks, per FLID (pkey), its latest PENDING row and keeps the
// FLIDs whose latest row is due, oldest latest row first. A FLID whose
// latest pending row is older than a row already SENT is superseded: its
// state must not overwrite the newer one already delivered.
const schdSelect = `
WITH latest AS (
	SELECT DISTINCT ON (pkey) id, pkey, next_attempt_at
	FROM outbox
	WHERE target = 'schd' AND state = 'PENDING'
	ORDER BY pkey, id DESC
)
SELECT o.id, o.pkey, o.payload, o.headers,
       EXISTS (SELECT 1 FROM outbox n
               WHERE n.target = 'schd' AND n.pkey = o.pkey AND n.id > o.id AND n.state = 'SENT')
FROM latest l JOIN outbox o ON o.id = l.id
WHERE l.next_attempt_at <= $1
ORDER BY l.id
LIMIT $2`

// schdMarkSent marks every pending row of each (pkey, latest id) pair with
// an ID up to that latest ID as SENT, in one statement: all rows a record
// represents end together.
const schdMarkSent = `
UPDATE outbox o
SET state = 'SENT', sent_at = $4,
    attempts = CASE WHEN b.superseded THEN o.attempts ELSE o.attempts + 1 END,
    outcome = CASE WHEN b.superseded THEN 'superseded'
                   WHEN o.id = b.id THEN 'produced'
                   ELSE 'coalesced' END
FROM unnest($1::text[], $2::bigint[], $3::boolean[]) AS b(pkey, id, superseded)
WHERE o.target = 'schd' AND o.state = 'PENDING' AND o.pkey = b.pkey AND o.id <= b.id`

// schdBackOff records a failed flush on every row of the batch: one more
// attempt, the next one after min(backoff-min * 2^(attempts-1),
// backoff-max), or DEAD when the attempts run out.
const schdBackOff = `
UPDATE outbox o
SET attempts = o.attempts + 1,
    last_error = $4,
    state = CASE WHEN o.attempts + 1 >= $5 THEN 'DEAD' ELSE 'PENDING' END,
    next_attempt_at = CASE WHEN o.attempts + 1 >= $5 THEN o.next_attempt_at
        ELSE $3::timestamptz + LEAST($6::bigint * power(2, LEAST(o.attempts, 40)), $7::bigint) * interval '1 microsecond' END
FROM unnest($1::text[], $2::bigint[]) AS b(pkey, id)
WHERE o.target = 'schd' AND o.state = 'PENDING' AND o.pkey = b.pkey AND o.id <= b.id
RETURNING o.id, o.state`

// FlushOnce runs one schd flush at the clock's now: it takes the FLIDs whose
// latest pending row is due (at most SchdFlushLimit, oldest first), produces
// each one's latest state — a null value (tombstone) for a deleted flight —
// and marks every pending row those records represent as SENT together. When
// the produce fails, every row of the batch backs off as a whole and becomes
// DEAD at max-attempts; nothing of the batch is marked SENT. Only the latest
// state of a FLID is ever produced, and never after a newer one was
// delivered, so per-FLID order holds (INV-10, C-29).
func (s *Schd) FlushOnce(ctx context.Context) (FlushResult, error) {
	var res FlushResult
	now := s.r.opt.Clock.Now()
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := s.r.reads.Query(qctx, schdSelect, now, s.r.opt.SchdFlushLimit)
	if err != nil {
		return res, fmt.Errorf("reading schd rows: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (schdLatest, error) {
		var l schdLatest
		err := row.Scan(&l.ID, &l.Key, &l.Payload, &l.Headers, &l.Superseded)
		return l, err
	})
	if err != nil {
		return res, fmt.Errorf("reading schd rows: %w", err)
	}
	if len(batch) == 0 {
		return res, nil
	}
	res.Full = len(batch) == s.r.opt.SchdFlushLimit

	var (
		keys       = make([]string, 0, len(batch))
		ids        = make([]int64, 0, len(batch))
		superseded = make([]bool, 0, len(batch))
		recs       []*kgo.Record
		sentKeys   []string
		sentIDs    []int64
	)
	for _, l := range batch {
		keys = append(keys, l.Key)
		ids = append(ids, l.ID)
		superseded = append(superseded, l.Superseded)
		if l.Superseded {
			res.Superseded++
			s.r.log.Warn("schd row older than a delivered state; not produced", "flid", l.Key, "outbox_id", l.ID)
			continue
		}
		recs = append(recs, schdRecord(s.r.opt.Kafka.Topics.Schd, l))
		sentKeys = append(sentKeys, l.Key)
		sentIDs = append(sentIDs, l.ID)
		if l.Payload == nil {
			res.Tombstones++
		}
	}

	if len(recs) > 0 {
		// The term must be current before the flush leaves for Kafka; the
		// marks that follow are fenced, and a refusal ends the term (R-H6).
		if err := s.r.db(TargetSchd).Check(ctx); err != nil {
			return FlushResult{}, err
		}
		spans := s.r.traceRecords(ctx, TargetSchd, sentIDs, recs) // the message's trace (R-I4)
		pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
		results, restart := produceTx(pctx, s.cl, recs) // all or nothing; fenced at the broker too
		pcancel()
		spans.end(results)
		perr := results.FirstErr()
		if perr != nil {
			if ctx.Err() != nil {
				// Shutting down: the rows stay as they are and go in a
				// flush after the restart.
				return FlushResult{}, ctx.Err()
			}
			if err := s.backOff(ctx, sentKeys, sentIDs, perr); err != nil {
				return FlushResult{}, err
			}
			if restart != nil {
				return FlushResult{}, restart
			}
			return FlushResult{}, fmt.Errorf("producing %d schd records: %w", len(recs), perr)
		}
		res.Records = len(recs)
	}

	n, err := s.markFlushed(ctx, keys, ids, superseded)
	if err != nil {
		// The records are out; a later flush produces the same (or a
		// newer) state again, which consumers of a latest-state topic
		// absorb (at-least-once, INV-10). A refused fence ends the term:
		// the new holder's flush is that later one.
		return res, err
	}
	res.RowsSent = n
	return res, nil
}

// markFlushed marks every pending row the flush's records represent as
// SENT (schdMarkSent) and returns how many rows it marked.
func (s *Schd) markFlushed(ctx context.Context, keys []string, ids []int64, superseded []bool) (int, error) {
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer ucancel()
	n, err := s.r.db(TargetSchd).Exec(uctx, schdMarkSent, keys, ids, superseded, s.r.opt.Clock.Now())
	if err != nil {
		return 0, fmt.Errorf("marking schd rows sent: %w", err)
	}
	s.r.sent.Add(ctx, n, targetAttr(TargetSchd))
	return int(n), nil
}

// schdRecord builds the record of a FLID's latest row: key FLID, value the
// schd state the processor encoded (services/internal/contract, schema
// version 2) or null for a deleted flight, headers from the row — event ID
// and type, schema and state version, content type, trace context — as
// they were encoded, so the record is exactly the contract's.
func schdRecord(topic string, l schdLatest) *kgo.Record {
	rec := &kgo.Record{Topic: topic, Key: []byte(l.Key), Value: l.Payload}
	if len(l.Headers) > 0 {
		var hs map[string]string
		if err := json.Unmarshal(l.Headers, &hs); err == nil {
			for _, k := range slices.Sorted(maps.Keys(hs)) {
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(hs[k])})
			}
		}
	}
	return rec
}

// backOff records a failed flush on every row of the batch, in one
// statement, and alerts on rows that became DEAD.
func (s *Schd) backOff(ctx context.Context, keys []string, ids []int64, cause error) error {
	now := s.r.opt.Clock.Now()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	type change struct {
		ID    int64
		State string
	}
	var changed []change
	err := s.r.db(TargetSchd).InTx(uctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(uctx, schdBackOff, keys, ids, now, cause.Error(), s.r.opt.MaxAttempts,
			s.r.opt.BackoffMin.Microseconds(), s.r.opt.BackoffMax.Microseconds())
		if err != nil {
			return err
		}
		changed, err = pgx.CollectRows(rows, pgx.RowToStructByPos[change])
		return err
	})
	if err != nil {
		return fmt.Errorf("recording schd delivery failure: %w", err)
	}
	var dead []int64
	for _, c := range changed {
		if c.State == "DEAD" {
			dead = append(dead, c.ID)
		}
	}
	s.r.failed.Add(ctx, int64(len(changed)), targetAttr(TargetSchd))
	if len(dead) > 0 {
		s.r.dead.Add(ctx, int64(len(dead)), targetAttr(TargetSchd))
		s.r.log.Error("schd rows are DEAD (dead-letter)", "target", TargetSchd, "outbox_ids", dead, "err", cause, "alert", "outbox-dead")
	}
	s.r.log.Warn("schd flush failed; the batch backs off", "records", len(ids), "rows", len(changed), "dead", len(dead), "err", cause)
	return nil
}
