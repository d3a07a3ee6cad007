package relay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// outages keeps, per target, how many drains in a row failed for a
// transient cause (R-L2). An outage is a condition of the target's
// dependency, not of a row: the wait before the next try follows the
// target's streak — from the first retry delay up to its cap (at most a
// minute), with jitter — and every row the failed drain tried gets that
// wait, without its attempts growing. A fresh dispatcher starts its streak
// at zero, so a pod started during an outage retries at the first delay,
// not at a delay grown from a count of earlier tries.
type outages struct {
	mu     sync.Mutex
	streak map[string]int
}

// fail records a transient failure of target and returns the streak,
// this failure included.
func (o *outages) fail(target string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.streak == nil {
		o.streak = map[string]int{}
	}
	o.streak[target]++
	return o.streak[target]
}

// ok ends target's streak: its dependency answered.
func (o *outages) ok(target string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.streak, target)
}

// transientWait returns when a row of target that just failed for a
// transient cause is tried again: the delivery schedule of the mailbox
// targets (markers, COUTMSGS) or of the Kafka targets, walked by the
// target's streak.
func (r *Relay) transientWait(target string, streak int) time.Duration {
	if target == TargetMailbox || target == TargetCoutmsgs {
		return r.delay(streak, min(time.Second, r.opt.BackfillOutageRetryMax), r.opt.BackfillOutageRetryMax)
	}
	return r.delay(streak, r.opt.BackoffMin, r.opt.BackoffMax)
}

// watchEvery is how often a target's loop re-reads the age of its oldest
// retrying row and its parked rows for the gauges.
const watchEvery = 10 * time.Second

// watchQuery reads, for one target, the creation of its oldest row that is
// retrying after a failure (PENDING in the retry lane with an error), and
// its parked rows and keys: PENDING rows held behind an older DEAD row of
// their key (R-L3). It walks the retry lane (outbox_retry_idx) and the
// DEAD rows by key (outbox_dead_key_idx), never the delivered history.
const watchQuery = `
SELECT (SELECT min(created_at) FROM outbox WHERE target=$1 AND state='PENDING' AND retry AND last_error IS NOT NULL),
       count(*), count(DISTINCT p.pkey)
FROM outbox p
WHERE p.target=$1 AND p.state='PENDING' AND p.retry
  AND EXISTS (SELECT 1 FROM outbox d WHERE d.target=p.target AND d.pkey=p.pkey AND d.state='DEAD' AND d.id < p.id)`

// watched is the last reading of watchQuery for one target.
type watched struct {
	at                   time.Time
	oldest               *time.Time
	parkedRows, parkKeys int64
}

// watches holds the readings of every target, exported as gauges.
type watches struct {
	mu sync.Mutex
	by map[string]watched
}

// watch re-reads target's gauges when the last reading is older than
// watchEvery. A failed read keeps the last values: the gauges go stale
// rather than to zero while PostgreSQL is away.
func (r *Relay) watch(ctx context.Context, target string) {
	now := r.opt.Clock.Now()
	r.watches.mu.Lock()
	last, ok := r.watches.by[target]
	r.watches.mu.Unlock()
	if ok && now.Sub(last.at) < watchEvery && now.After(last.at) {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w := watched{at: now}
	if err := r.reads.QueryRow(qctx, watchQuery, target).Scan(&w.oldest, &w.parkedRows, &w.parkKeys); err != nil {
		if ctx.Err() == nil {
			r.log.Debug("reading the retrying and parked rows", "target", target, "err", err)
		}
		return
	}
	r.watches.mu.Lock()
	defer r.watches.mu.Unlock()
	if r.watches.by == nil {
		r.watches.by = map[string]watched{}
	}
	r.watches.by[target] = w
}

// initOutageMetrics registers the gauges of R-L2 and R-L3, read from the
// loops' last readings.
func (r *Relay) initOutageMetrics(m metric.Meter) error {
	age, err := m.Float64ObservableGauge("msgx_dispatcher_retrying_oldest_age_seconds", metric.WithUnit("s"),
		metric.WithDescription("age of the target's oldest outbox row retrying after a failure (an outage keeps rows retrying, R-L2); 0 when none"))
	if err != nil {
		return fmt.Errorf("creating metric: %w", err)
	}
	rows, err := m.Int64ObservableGauge("msgx_dispatcher_parked_rows",
		metric.WithDescription("outbox rows waiting behind a dead-lettered row of their key on the target (parked FLIDs, R-L3)"))
	if err != nil {
		return fmt.Errorf("creating metric: %w", err)
	}
	keys, err := m.Int64ObservableGauge("msgx_dispatcher_parked_keys",
		metric.WithDescription("keys (FLIDs) parked on the target: a dead-lettered row holds their later rows until requeued or discarded (R-L3)"))
	if err != nil {
		return fmt.Errorf("creating metric: %w", err)
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		now := r.opt.Clock.Now()
		r.watches.mu.Lock()
		defer r.watches.mu.Unlock()
		for _, t := range []string{TargetFlightState, TargetMsg, TargetSchd, TargetProjectionControl, TargetMailbox, TargetCoutmsgs} {
			w := r.watches.by[t]
			attrs := metric.WithAttributes(attribute.String("target", t))
			a := 0.0
			if w.oldest != nil {
				a = max(0, now.Sub(*w.oldest).Seconds())
			}
			o.ObserveFloat64(age, a, attrs)
			o.ObserveInt64(rows, w.parkedRows, attrs)
			o.ObserveInt64(keys, w.parkKeys, attrs)
		}
		return nil
	}, age, rows, keys)
	if err != nil {
		return fmt.Errorf("registering metric callback: %w", err)
	}
	return nil
}
