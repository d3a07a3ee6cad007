package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
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
	var closeNow func()
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
			closeNow = kafka.CloseOnStop(ctx, cl) // a produce in flight ends with the stop
			// An idle producer asks the brokers nothing: probed, a hang
			// or an outage turns readiness false all the same (R-M1).
			go kafka.Probe(ctx, cl, kafka.ProbeInterval)
			go r.watchLoss(ctx, cl, target, topic)
			return r.loop(ctx, target, func(ctx context.Context) (bool, error) { return r.drainKafka(ctx, cl, target) })
		},
		func(error) error {
			if closeNow != nil {
				closeNow()
			} else if cl != nil {
				cl.Close()
			}
			return nil
		})
}

// kafkaFreshQuery reads the fresh lane above the floor in ID order
// (outbox_fresh_idx): rows as inserted, each with whether it is due and
// whether it is held: an older row of its key waits in the retry lane —
// in backoff, or due but beyond the retry lane's batch, so never read with
// it — or is DEAD: the key is parked on the target until an operator
// requeues or discards that row (R-L3, outbox_dead_key_idx).
const kafkaFreshQuery = `
SELECT o.id, o.pkey, o.payload, o.headers, o.attempts, o.created_at, o.next_attempt_at <= $2,
       EXISTS (SELECT 1 FROM outbox b WHERE b.target=o.target AND b.pkey=o.pkey AND b.state='PENDING' AND b.retry
               AND b.id < o.id)
       OR EXISTS (SELECT 1 FROM outbox d WHERE d.target=o.target AND d.pkey=o.pkey AND d.state='DEAD' AND d.id < o.id)
FROM outbox o
WHERE o.target=$1 AND o.state='PENDING' AND NOT o.retry AND o.id > $3
ORDER BY o.id LIMIT $4`

// kafkaRetryQuery reads the due rows of the retry lane (outbox_retry_idx)
// whose key has no older row still in backoff and is not parked behind a
// DEAD row (R-L3).
const kafkaRetryQuery = `
SELECT o.id, o.pkey, o.payload, o.headers, o.attempts, o.created_at, true, false
FROM outbox o
WHERE o.target=$1 AND o.state='PENDING' AND o.retry AND o.next_attempt_at <= $2
  AND NOT EXISTS (SELECT 1 FROM outbox b WHERE b.target=o.target AND b.pkey=o.pkey AND b.state='PENDING' AND b.retry
                  AND b.id < o.id AND b.next_attempt_at > $2)
  AND NOT EXISTS (SELECT 1 FROM outbox d WHERE d.target=o.target AND d.pkey=o.pkey AND d.state='DEAD' AND d.id < o.id)
ORDER BY o.id LIMIT $3`

// laneRow is a pending row read from one of the two lanes.
type laneRow struct {
	outboxRow
	fresh bool // read from the fresh lane
	due   bool
	held  bool // an older row of its key waits in backoff
}

func scanLaneRows(rows pgx.Rows, fresh bool) ([]laneRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (laneRow, error) {
		l := laneRow{fresh: fresh}
		err := row.Scan(&l.ID, &l.Key, &l.Payload, &l.Headers, &l.Attempts, &l.Created, &l.due, &l.held)
		return l, err
	})
}

// readLanes reads up to batch rows of each lane, merged in ID order, and
// proves the target's term current after them, all in one round trip
// (R-M2): whatever the lanes hold may go to Kafka only under a current
// term (R-H6), and each round trip counts on a slow path.
func (r *Relay) readLanes(ctx context.Context, target string, now time.Time, floor int64) ([]laneRow, error) {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var fresh, retry []laneRow
	b := &pgx.Batch{}
	b.Queue(kafkaFreshQuery, target, now, floor, r.opt.Batch).Query(func(rows pgx.Rows) (err error) {
		fresh, err = scanLaneRows(rows, true)
		return err
	})
	b.Queue(kafkaRetryQuery, target, now, r.opt.Batch).Query(func(rows pgx.Rows) (err error) {
		retry, err = scanLaneRows(rows, false)
		return err
	})
	if err := r.db(target).ReadChecked(qctx, r.reads, b); err != nil {
		return nil, fmt.Errorf("reading outbox: %w", err)
	}
	all := append(fresh, retry...)
	slices.SortFunc(all, func(a, b laneRow) int { return cmp.Compare(a.ID, b.ID) })
	return all, nil
}

// freshFloor returns how far the fresh lane's floor may advance after a
// drain that settled every row of lane except those not due: up to the
// last fresh row read, or to just below the first fresh row left pending.
func freshFloor(lane []laneRow, floor int64) int64 {
	for _, l := range lane {
		if !l.fresh {
			continue
		}
		if !l.due {
			return floor
		}
		floor = l.ID
	}
	return floor
}

// drainKafka relays one batch. It reports whether a full batch was read
// (so more may be waiting).
func (r *Relay) drainKafka(ctx context.Context, cl *kgo.Client, target string) (bool, error) {
	now := r.opt.Clock.Now()
	floor, token := r.floors.start(target)
	lane, err := r.readLanes(ctx, target, now, floor)
	if err != nil {
		return false, err
	}
	// A row is held back while an older row of the same key waits, so one
	// key's rows are delivered in order (per-FLID order). A transaction
	// carries at most one row of a key: should it commit without its rows
	// being recorded SENT (the term ends between the commit and the
	// settlement), the next term repeats only each key's latest event,
	// never an older one after a newer (R-H7, R-L3). A held fresh row
	// moves to the retry lane, so that the floor passes it.
	var batch []outboxRow
	var held []int64
	blocked := map[string]bool{}
	sending := map[string]bool{} // keys with a row in the batch
	freshN, retryN, deferred := 0, 0, 0
	for _, l := range lane {
		if l.fresh {
			freshN++
		} else {
			retryN++
		}
		switch {
		case !l.due:
			blocked[l.Key] = true
		case l.held || blocked[l.Key]:
			if sending[l.Key] {
				deferred++ // behind a row of its key in this batch: the next drain
			}
			blocked[l.Key] = true
			if l.fresh {
				held = append(held, l.ID)
			}
		default:
			batch = append(batch, l.outboxRow)
			blocked[l.Key], sending[l.Key] = true, true
		}
	}
	more := freshN == r.opt.Batch || retryN == r.opt.Batch || deferred > 0
	if len(batch) == 0 {
		if len(held) > 0 {
			if err := r.settle(ctx, target, nil, held); err != nil {
				return false, err
			}
			r.floors.advance(target, token, freshFloor(lane, floor))
		}
		return more && len(held) > 0, nil
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
	// The term was proved current with the lanes' reads (readLanes); from
	// here on every write is fenced, and a refusal ends the term (R-H6).
	// PostgreSQL must take the statement that records what goes out
	// before it goes out: settleQuery, naming no row (R-L8).
	if err := r.proveRecordable(ctx, target, settleQuery,
		[]int64{}, []string{}, []*string{}, []*time.Time{}, []*time.Time{}, []int64{}, []int32{}); err != nil {
		return false, err
	}
	ids := make([]int64, len(batch))
	for i, o := range batch {
		ids[i] = o.ID
	}
	spans := r.traceRecords(ctx, target, ids, recs) // the message's trace (R-I4)
	pctx, pcancel := context.WithTimeout(ctx, r.opt.ProduceTimeout)
	results, restart := produceTx(pctx, cl, recs) // all or nothing; fenced at the broker too
	if restart == nil && ctx.Err() == nil && len(recs) > 1 && anyPermanent(results) {
		// One record cannot be delivered and took its batch down with it:
		// each record goes alone, so that only that one is dead-lettered.
		results, restart = r.isolate(pctx, cl, recs)
	}
	pcancel()
	spans.end(results)
	for _, l := range r.tails[target].committed(results, r.opt.Clock.Now()) {
		r.reportLoss(ctx, target, l)
	}
	if ctx.Err() != nil {
		// Shutting down, or the term ended: the rows stay as they are and
		// are tried again by the next term (nothing committed is lost).
		return false, nil
	}
	done := r.opt.Clock.Now()
	var settled []settlement
	var created []time.Time // of the sent rows
	failedKeys := map[string]bool{}
	nFailed := 0
	var lastErr, stallErr error
	for i, res := range results {
		o := batch[i]
		// Once a key failed in this batch, its later rows are retried after
		// it even if they were delivered, so that the last delivery of every
		// key is in order.
		if res.Err != nil || failedKeys[o.Key] {
			failedKeys[o.Key] = true
			if res.Err != nil {
				lastErr = res.Err
			}
			if stalls(res.Err) {
				stallErr = res.Err // the loop's stall, whatever failed after it (R-L8)
			}
			nFailed++
			continue
		}
		settled = append(settled, settlement{id: o.ID, state: "SENT", sentAt: &done})
		created = append(created, o.Created)
	}
	wait := time.Duration(0)
	for i, res := range results {
		o := batch[i]
		if res.Err == nil && !failedKeys[o.Key] {
			continue
		}
		cause := res.Err
		if cause == nil {
			cause = batchAbortedError{cause: lastErr}
		}
		c := classifyKafka(cause)
		if c.waits() && wait == 0 {
			wait = r.transientWait(target, r.outages.fail(target))
		}
		settled = append(settled, r.failure(ctx, target, o, c, cause, done, wait))
	}
	if wait == 0 {
		r.outages.ok(target)
	}
	if err := r.settle(ctx, target, settled, held); err != nil {
		return false, err
	}
	r.floors.advance(target, token, freshFloor(lane, floor))
	r.sent.Add(ctx, int64(len(created)), targetAttr(target))
	for _, c := range created {
		r.stage(ctx, StageProduced, target, c, done)
	}
	if len(created) > 0 {
		r.delivered(target)
	}
	if restart != nil {
		return false, restart
	}
	if nFailed > 0 {
		if stallErr != nil {
			lastErr = stallErr
		}
		return false, fmt.Errorf("producing %d of %d records to %s: %w", nFailed, len(batch), target, lastErr)
	}
	return more, nil
}

// batchClass is the class of a failed batch as a whole: one that waits
// (transient, stalled) only when every record's failure waits, stalled
// when one of them is.
func batchClass(results kgo.ProduceResults) class {
	c := transient
	for _, res := range results {
		if res.Err == nil {
			continue
		}
		switch rc := classifyKafka(res.Err); {
		case !rc.waits():
			return rc
		case rc == stalled:
			c = stalled
		}
	}
	return c
}

// anyPermanent reports whether a record failed with an error no retry can
// cure (classifyKafka).
func anyPermanent(results kgo.ProduceResults) bool {
	for _, res := range results {
		if res.Err != nil && classifyKafka(res.Err) == permanent {
			return true
		}
	}
	return false
}

// isolate produces each record of a batch that failed permanently in a
// transaction of its own, in order, and returns each one's result. Once a
// record of a key fails, the key's later records are not produced (they
// fail with batchAbortedError and wait behind it: R-L3), so a key's
// delivered records stay in order.
func (r *Relay) isolate(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) (kgo.ProduceResults, error) {
	out := make(kgo.ProduceResults, len(recs))
	failed := map[string]error{}
	for i, rec := range recs {
		out[i].Record = rec
		if err, ok := failed[string(rec.Key)]; ok {
			out[i].Err = batchAbortedError{cause: err}
			continue
		}
		if ctx.Err() != nil {
			out[i].Err = context.Cause(ctx)
			failed[string(rec.Key)] = out[i].Err
			continue
		}
		res, restart := produceTx(ctx, cl, []*kgo.Record{rec})
		out[i].Err = res[0].Err
		if out[i].Err != nil {
			failed[string(rec.Key)] = out[i].Err
		}
		if restart != nil {
			for j := i + 1; j < len(recs); j++ {
				out[j] = kgo.ProduceResult{Record: recs[j], Err: restart}
			}
			return out, restart
		}
	}
	return out, nil
}

// settlement is what one delivery attempt did to one outbox row.
type settlement struct {
	id        int64
	uncounted bool   // a transient failure: the row's attempts stay (R-L2)
	state     string // SENT, PENDING (backoff) or DEAD
	lastError *string
	next      *time.Time // the next attempt of a row backing off
	sentAt    *time.Time
}

// settleQuery records a batch of delivery attempts in one statement: each
// row's new state, its attempts grown by the attempt's weight (0 for a
// transient failure, R-L2), and — for a failure — its error and next
// attempt; every row not SENT joins the retry lane. The held rows (the
// sixth array: attempted nothing) only move to the retry lane.
const settleQuery = `
UPDATE outbox o SET
	state = v.state,
	attempts = o.attempts + v.add,
	last_error = COALESCE(v.last_error, o.last_error),
	next_attempt_at = COALESCE(v.next, o.next_attempt_at),
	sent_at = COALESCE(v.sent_at, o.sent_at),
	retry = o.retry OR v.state <> 'SENT'
FROM (
	SELECT s.*
	FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $7::int[]) AS s(id, state, last_error, next, sent_at, add)
	UNION ALL
	SELECT h, 'PENDING', NULL, NULL, NULL, 0 FROM unnest($6::bigint[]) AS h
) v
WHERE o.id = v.id AND o.state = 'PENDING'`

// settle records settled and moves held to the retry lane, in one fenced
// statement.
func (r *Relay) settle(ctx context.Context, target string, settled []settlement, held []int64) error {
	if len(settled) == 0 && len(held) == 0 {
		return nil
	}
	ids := make([]int64, len(settled))
	states := make([]string, len(settled))
	errs := make([]*string, len(settled))
	next := make([]*time.Time, len(settled))
	sent := make([]*time.Time, len(settled))
	add := make([]int32, len(settled))
	for i, s := range settled {
		ids[i], states[i], errs[i], next[i], sent[i] = s.id, s.state, s.lastError, s.next, s.sentAt
		if !s.uncounted {
			add[i] = 1
		}
	}
	if held == nil {
		held = []int64{}
	}
	if _, err := r.db(target).Exec(ctx, settleQuery, ids, states, errs, next, sent, held, add); err != nil {
		return fmt.Errorf("marking outbox rows sent or backed off (%s): %w", target, err)
	}
	return nil
}

// markDelivered records rows as delivered.
func (r *Relay) markDelivered(ctx context.Context, target string, ids []int64, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	settled := make([]settlement, len(ids))
	for i, id := range ids {
		settled[i] = settlement{id: id, state: "SENT", sentAt: &now}
	}
	if err := r.settle(ctx, target, settled, nil); err != nil {
		return err
	}
	r.sent.Add(ctx, int64(len(ids)), targetAttr(target))
	return nil
}

// failure returns the settlement of a failed delivery of class c (R-L2):
// a transient failure waits wait (the target's outage schedule) and keeps
// the row's attempts; a permanent one is dead-lettered at once with its
// cause, parking the row's key behind it (R-L3); a refused one backs off
// by the row's attempts and is dead-lettered when they run out.
func (r *Relay) failure(ctx context.Context, target string, o outboxRow, c class, cause error, now time.Time, wait time.Duration) settlement {
	attempts := o.Attempts + 1
	msg := "not delivered"
	if cause != nil {
		msg = cause.Error()
	}
	r.failed.Add(ctx, 1, classAttrs(target, c))
	switch {
	case c.waits():
		next := now.Add(wait)
		return settlement{id: o.ID, state: "PENDING", lastError: &msg, next: &next, uncounted: true}
	case c == permanent || attempts >= r.opt.MaxAttempts:
		r.dead.Add(ctx, 1, targetAttr(target))
		r.log.Error("outbox row is DEAD (dead-letter); its key is parked on the target until the row is requeued or discarded",
			"target", target, "outbox_id", o.ID, "key", o.Key, "attempts", attempts, "class", c.String(), "err", msg, "alert", "outbox-dead")
		return settlement{id: o.ID, state: "DEAD", lastError: &msg}
	}
	next := now.Add(r.delay(attempts, r.opt.BackoffMin, r.opt.BackoffMax))
	return settlement{id: o.ID, state: "PENDING", lastError: &msg, next: &next}
}

// fail records one failed delivery (failure).
func (r *Relay) fail(ctx context.Context, target string, o outboxRow, cause error, now time.Time) error {
	c := classifyKafka(cause)
	var wait time.Duration
	if c.waits() {
		wait = r.transientWait(target, r.outages.fail(target))
	}
	return r.settle(ctx, target, []settlement{r.failure(ctx, target, o, c, cause, now, wait)}, nil)
}
