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

	"msgexchange/libs/kafka"
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
	var closeNow func()
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
		func(ctx context.Context) error {
			closeNow = kafka.CloseOnStop(ctx, s.cl)        // a produce in flight ends with the stop
			go kafka.Probe(ctx, s.cl, kafka.ProbeInterval) // idle between flushes (R-M1)
			go r.watchLoss(ctx, s.cl, TargetSchd, r.opt.Kafka.Topics.Schd)
			return s.run(ctx)
		},
		func(error) error {
			if closeNow != nil {
				closeNow()
			} else if s != nil {
				s.cl.Close()
			}
			return nil
		})
}

// run flushes at once and then every flush period until ctx ends. A full
// flush does not flush again before the period is over: flush-limit bounds
// what one period sends. Each flush reports to the target's progress, and
// a flush loop stalled past the limit returns the stall (R-L8).
func (s *Schd) run(ctx context.Context) error {
	s.r.floors.lowerTarget(TargetSchd, 0) // a new term scans from the start once
	s.r.recordable[TargetSchd].Store(false)
	t := time.NewTicker(s.r.opt.SchdFlushPeriod)
	defer t.Stop()
	for {
		res, err := s.FlushOnce(ctx)
		s.r.watch(ctx, TargetSchd)
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
		if serr := s.r.drained(TargetSchd, err); serr != nil {
			return serr // stalled past the limit: the process ends (R-L8)
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
	IDs        []int64 // every pending row of the FLID read, the latest included
	Superseded bool
}

// schdSelect picks, per FLID (pkey), its latest PENDING row and keeps the
// FLIDs whose latest row is due, oldest latest row first, with the IDs of
// every pending row of the FLID. A FLID whose latest pending row is older
// than a row already SENT is superseded: its state must not overwrite the
// newer one already delivered.
//
// The pending rows are read from the two lanes of migration 00018, so the
// dead index entries that delivered rows leave until vacuum are never
// walked (issue 11, R-J5): the fresh lane above the floor $3
// (outbox_fresh_idx) and the retry lane (outbox_retry_idx). The superseded
// check walks outbox_schd_key_idx from the latest row up, over the FLID's
// newer rows only, of which there are none unless an older row was put
// back. Each row also carries where the fresh lane's floor may move once
// the batch is marked: below the first fresh row of a FLID not picked
// (not due, or past the limit), else to the last fresh row read. That
// floor is read from the ranked FLIDs (first_fresh of those ranked out),
// one pass: written as "a pending row whose FLID is not in pick", the
// planner, estimating one row of each, ran it as a nested-loop anti join
// of every pending row against the picked ones, 9,337 × 1,000 comparisons
// and 4.5 s a flush with 9,000 schd rows pending (EXPLAIN on the R-M5
// bench's database), which let the backlog grow while it ran.
const schdSelect = `
WITH pend AS (
	SELECT id, pkey, next_attempt_at, true AS fresh FROM outbox
	WHERE target = 'schd' AND state = 'PENDING' AND NOT retry AND id > $3
	UNION ALL
	SELECT id, pkey, next_attempt_at, false FROM outbox
	WHERE target = 'schd' AND state = 'PENDING' AND retry
),
latest AS (
	SELECT pkey, max(id) AS id, array_agg(id ORDER BY id) AS ids,
	       (array_agg(next_attempt_at ORDER BY id DESC))[1] AS next_attempt_at,
	       min(id) FILTER (WHERE fresh) AS first_fresh
	FROM pend GROUP BY pkey
),
ranked AS (
	SELECT pkey, id, ids, first_fresh,
	       CASE WHEN next_attempt_at <= $1 THEN row_number() OVER (PARTITION BY next_attempt_at <= $1 ORDER BY id) END AS rank
	FROM latest
),
pick AS (
	SELECT pkey, id, ids FROM ranked WHERE rank <= $2
)
SELECT o.id, o.pkey, o.payload, o.headers, k.ids,
       EXISTS (SELECT 1 FROM outbox n
               WHERE n.target = 'schd' AND n.pkey = o.pkey AND n.id > o.id AND n.state = 'SENT' OFFSET 0),
       (SELECT min(r.first_fresh) FROM ranked r WHERE r.rank IS NULL OR r.rank > $2),
       (SELECT max(p.id) FROM pend p WHERE p.fresh)
FROM pick k JOIN outbox o ON o.id = k.id
ORDER BY k.id`

// schdMarkSent marks the rows $1 still PENDING as SENT, in one statement:
// all rows a record represents end together. $2 is each row's latest row
// (the produced one), $3 whether its FLID was superseded. Each row is found
// by its key, never by a walk of its FLID's history. The state is tested
// through CASE on purpose (as in schdBackOff): a plain state = 'PENDING'
// lets the planner read the rows through a partial index of pending rows,
// whose dead entries of delivered rows it cannot see in stale statistics
// (50,000 walked to find ten in TestSchd_R_J5_…).
const schdMarkSent = `
UPDATE outbox o
SET state = 'SENT', sent_at = $4,
    attempts = CASE WHEN b.superseded THEN o.attempts ELSE o.attempts + 1 END,
    outcome = CASE WHEN b.superseded THEN 'superseded'
                   WHEN o.id = b.latest THEN 'produced'
                   ELSE 'coalesced' END
FROM unnest($1::bigint[], $2::bigint[], $3::boolean[]) AS b(id, latest, superseded)
WHERE o.id = b.id AND CASE WHEN o.target = 'schd' AND o.state = 'PENDING' THEN true ELSE false END`

// schdBackOffRead locks the rows $1 of a failed flush still PENDING and
// reads their attempts, from which each row's next attempt follows
// (Relay.delay). The state is tested through CASE, as in schdMarkSent.
const schdBackOffRead = `
SELECT o.id, o.attempts FROM outbox o
WHERE o.id = ANY($1::bigint[]) AND CASE WHEN o.target = 'schd' AND o.state = 'PENDING' THEN true ELSE false END
ORDER BY o.id FOR UPDATE`

// schdBackOff records a failed flush on the rows $1: $5 more attempts (0
// for a transient failure, R-L2), the error, and each row's new state and
// next attempt ($2, $3). Every row joins the retry lane, so that the fresh
// lane's floor passes it.
const schdBackOff = `
UPDATE outbox o
SET attempts = o.attempts + $5, last_error = $4, retry = true,
    state = b.state, next_attempt_at = COALESCE(b.next, o.next_attempt_at)
FROM unnest($1::bigint[], $2::text[], $3::timestamptz[]) AS b(id, state, next)
WHERE o.id = b.id`

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
	floor, token := s.r.floors.start(TargetSchd)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := s.r.reads.Query(qctx, schdSelect, now, s.r.opt.SchdFlushLimit, floor)
	if err != nil {
		return res, fmt.Errorf("reading schd rows: %w", err)
	}
	var firstLeft, lastFresh *int64
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (schdLatest, error) {
		var l schdLatest
		err := row.Scan(&l.ID, &l.Key, &l.Payload, &l.Headers, &l.IDs, &l.Superseded, &firstLeft, &lastFresh)
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
		ids        []int64 // every row the flush ends
		latest     []int64 // each one's latest row
		superseded []bool
		recs       []*kgo.Record
		sentIDs    []int64 // the produced (latest) rows
		produced   []int64 // every row the produced records represent
	)
	for _, l := range batch {
		for _, id := range l.IDs {
			ids = append(ids, id)
			latest = append(latest, l.ID)
			superseded = append(superseded, l.Superseded)
		}
		if l.Superseded {
			res.Superseded++
			s.r.log.Warn("schd row older than a delivered state; not produced", "flid", l.Key, "outbox_id", l.ID)
			continue
		}
		recs = append(recs, schdRecord(s.r.opt.Kafka.Topics.Schd, l))
		sentIDs = append(sentIDs, l.ID)
		produced = append(produced, l.IDs...)
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
		if err := s.r.proveRecordable(ctx, TargetSchd, schdMarkSent, []int64{}, []int64{}, []bool{}, now); err != nil {
			return FlushResult{}, err
		}
		spans := s.r.traceRecords(ctx, TargetSchd, sentIDs, recs) // the message's trace (R-I4)
		pctx, pcancel := context.WithTimeout(ctx, s.r.opt.ProduceTimeout)
		results, restart := produceTx(pctx, s.cl, recs) // all or nothing; fenced at the broker too
		pcancel()
		spans.end(results)
		for _, l := range s.r.tails[TargetSchd].committed(results, now) {
			s.r.reportLoss(ctx, TargetSchd, l)
		}
		perr := results.FirstErr()
		if perr != nil {
			if ctx.Err() != nil {
				// Shutting down: the rows stay as they are and go in a
				// flush after the restart.
				return FlushResult{}, ctx.Err()
			}
			if err := s.backOff(ctx, produced, perr, batchClass(results)); err != nil {
				return FlushResult{}, err
			}
			if restart != nil {
				return FlushResult{}, restart
			}
			return FlushResult{}, fmt.Errorf("producing %d schd records: %w", len(recs), perr)
		}
		res.Records = len(recs)
		s.r.outages.ok(TargetSchd)
		s.r.delivered(TargetSchd)
	}

	n, err := s.markFlushed(ctx, ids, latest, superseded)
	if err != nil {
		// The records are out; a later flush produces the same (or a
		// newer) state again, which consumers of a latest-state topic
		// absorb (at-least-once, INV-10). A refused fence ends the term:
		// the new holder's flush is that later one.
		return res, err
	}
	res.RowsSent = n
	// Every fresh row read is now SENT but those of FLIDs not picked.
	switch {
	case firstLeft != nil:
		s.r.floors.advance(TargetSchd, token, *firstLeft-1)
	case lastFresh != nil:
		s.r.floors.advance(TargetSchd, token, *lastFresh)
	}
	return res, nil
}

// markFlushed marks every pending row the flush's records represent, and
// those of superseded FLIDs, as SENT (schdMarkSent) and returns how many
// rows it marked.
func (s *Schd) markFlushed(ctx context.Context, ids, latest []int64, superseded []bool) (int, error) {
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer ucancel()
	n, err := s.r.db(TargetSchd).Exec(uctx, schdMarkSent, ids, latest, superseded, s.r.opt.Clock.Now())
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
// statement, and alerts on rows that became DEAD. A failure of class c
// that waits (c.waits: the broker down, slow or refusing for a while, or
// refusing the producer until an operator acts) is not counted: the batch
// waits the target's outage schedule and is tried again for as long as the
// outage lasts (R-L2). Any other failure counts against each row's
// attempts and backs it off by them; schd carries the latest state of each
// flight, so no failure parks a FLID there (R-L3 is for the event topics).
func (s *Schd) backOff(ctx context.Context, ids []int64, cause error, c class) error {
	waits := c.waits()
	now := s.r.opt.Clock.Now()
	add, outageWait := 1, time.Duration(0)
	if waits {
		add, outageWait = 0, s.r.transientWait(TargetSchd, s.r.outages.fail(TargetSchd))
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	type change struct {
		ID    int64
		State string
	}
	var changed []change
	err := s.r.db(TargetSchd).InTx(uctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(uctx, schdBackOffRead, ids)
		if err != nil {
			return err
		}
		type locked struct {
			ID       int64
			Attempts int
		}
		found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[locked])
		if err != nil {
			return err
		}
		changed = changed[:0]
		bids := make([]int64, len(found))
		states := make([]string, len(found))
		next := make([]*time.Time, len(found))
		for i, l := range found {
			bids[i], states[i] = l.ID, "PENDING"
			if attempts := l.Attempts + 1; waits {
				at := now.Add(outageWait)
				next[i] = &at
			} else if attempts >= s.r.opt.MaxAttempts {
				states[i] = "DEAD"
			} else {
				at := now.Add(s.r.delay(attempts, s.r.opt.BackoffMin, s.r.opt.BackoffMax))
				next[i] = &at
			}
			changed = append(changed, change{ID: l.ID, State: states[i]})
		}
		_, err = tx.Exec(uctx, schdBackOff, bids, states, next, cause.Error(), add)
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
	s.r.failed.Add(ctx, int64(len(changed)), classAttrs(TargetSchd, c))
	if len(dead) > 0 {
		s.r.dead.Add(ctx, int64(len(dead)), targetAttr(TargetSchd))
		s.r.log.Error("schd rows are DEAD (dead-letter)", "target", TargetSchd, "outbox_ids", dead, "err", cause, "alert", "outbox-dead")
	}
	s.r.log.Warn("schd flush failed; the batch backs off", "records", len(ids), "rows", len(changed), "dead", len(dead), "err", cause)
	return nil
}
