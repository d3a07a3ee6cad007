package pipeline

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/clock"
)

// registerGauges exports the pipeline's health as observable gauges read
// from PostgreSQL at scrape time (R-F4). A gauge that cannot be read reports
// NaN, never 0, so a dashboard cannot mistake an outage for an empty
// backlog.
func registerGauges(m metric.Meter, pool *pgxpool.Pool, clk clock.Clock) error {
	if m == nil || pool == nil {
		return nil
	}
	unfinished, err := m.Float64ObservableGauge("msgx_backlog_unfinished", metric.WithDescription("messages not yet terminal (PENDING, FAILED, APPLIED)"))
	if err != nil {
		return fmt.Errorf("creating gauge: %w", err)
	}
	oldest, err := m.Float64ObservableGauge("msgx_oldest_unprocessed_seconds", metric.WithUnit("s"), metric.WithDescription("age of the oldest message not yet terminal"))
	if err != nil {
		return fmt.Errorf("creating gauge: %w", err)
	}
	unmarked, err := m.Float64ObservableGauge("msgx_unmarked_terminal", metric.WithDescription("terminal messages whose mailbox marker is not written yet"))
	if err != nil {
		return fmt.Errorf("creating gauge: %w", err)
	}
	oldestUnmarked, err := m.Float64ObservableGauge("msgx_oldest_unmarked_seconds", metric.WithUnit("s"), metric.WithDescription("time since the oldest unmarked terminal message finished"))
	if err != nil {
		return fmt.Errorf("creating gauge: %w", err)
	}
	abandoned, err := m.Float64ObservableGauge("msgx_backfill_abandoned", metric.WithDescription("mailbox markers abandoned because the row is missing, not yet acknowledged"))
	if err != nil {
		return fmt.Errorf("creating gauge: %w", err)
	}
	pending, err := m.Float64ObservableGauge("msgx_outbox_pending", metric.WithDescription("outbox rows waiting for delivery, by target"))
	if err != nil {
		return fmt.Errorf("creating gauge: %w", err)
	}
	dead, err := m.Float64ObservableGauge("msgx_outbox_dead", metric.WithDescription("outbox rows in the dead-letter state, by target"))
	if err != nil {
		return fmt.Errorf("creating gauge: %w", err)
	}
	// The processor's own targets are always reported (0 or NaN); any other
	// target found in the outbox (outbound requests, rebuild manifests) too.
	targets := []string{TargetFlightState, TargetMsg, TargetSchd, TargetMailbox}
	_, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		now := clk.Now()
		var nUnfinished, nUnmarked, nAbandoned float64
		var oldestAt, oldestUnmarkedAt *time.Time
		// Every count reads a partial index that holds only its rows —
		// proc_state_open_idx, proc_state_applied_idx and
		// proc_state_unmarked_idx — so a scrape costs the size of the
		// backlogs, not of proc_state's terminal history. Each set is one
		// aggregate of count and min: a lone min would be planned as the
		// first row in received-time order, a walk through the history.
		// A backfill that ended without a marker (abandoned: the mailbox row
		// was missing; discarded by an operator) is finished — the
		// dispatcher and the control plane set backfilled_at with its
		// outcome — so it leaves proc_state_unmarked_idx and the unmarked
		// gauges; the abandoned ones are counted on their own from the
		// ABANDONED outbox rows (outbox_dead_abandoned_idx) until an
		// operator acknowledges them (they become DISCARDED).
		err := pool.QueryRow(qctx, `
			WITH open AS (
			    SELECT count(*) AS n, min(COALESCE(received_at, registered_at)) AS oldest FROM proc_state WHERE state IN ('PENDING', 'FAILED')
			    UNION ALL
			    SELECT count(*), min(COALESCE(received_at, registered_at)) FROM proc_state WHERE state = 'APPLIED'),
			unmarked AS (
			    SELECT count(*) AS n, min(finished_at) AS oldest FROM proc_state WHERE finished_at IS NOT NULL AND backfilled_at IS NULL)
			SELECT (SELECT sum(n)::bigint FROM open), (SELECT min(oldest) FROM open), unmarked.n, unmarked.oldest,
			       (SELECT count(*) FROM outbox WHERE target='mailbox' AND state='ABANDONED')
			FROM unmarked`).
			Scan(&nUnfinished, &oldestAt, &nUnmarked, &oldestUnmarkedAt, &nAbandoned)
		if err != nil {
			nan := math.NaN()
			o.ObserveFloat64(unfinished, nan)
			o.ObserveFloat64(oldest, nan)
			o.ObserveFloat64(unmarked, nan)
			o.ObserveFloat64(oldestUnmarked, nan)
			o.ObserveFloat64(abandoned, nan)
			for _, t := range targets {
				o.ObserveFloat64(pending, nan, metric.WithAttributes(attribute.String("target", t)))
				o.ObserveFloat64(dead, nan, metric.WithAttributes(attribute.String("target", t)))
			}
			return nil
		}
		o.ObserveFloat64(unfinished, nUnfinished)
		o.ObserveFloat64(oldest, age(now, oldestAt))
		o.ObserveFloat64(unmarked, nUnmarked)
		o.ObserveFloat64(oldestUnmarked, age(now, oldestUnmarkedAt))
		o.ObserveFloat64(abandoned, nAbandoned)
		counts := map[string][2]float64{}
		// Each count reads only the partial indexes of its rows (the fresh
		// and the retry lane of pending rows, DEAD and ABANDONED rows), never
		// the delivered history: a scrape costs what waits, not what was
		// sent (issue 11).
		rows, err := pool.Query(qctx, `
			SELECT target, sum(pending), sum(dead) FROM (
			    SELECT target, count(*) AS pending, 0 AS dead FROM outbox WHERE state = 'PENDING' AND NOT retry GROUP BY target
			    UNION ALL
			    SELECT target, count(*), 0 FROM outbox WHERE state = 'PENDING' AND retry GROUP BY target
			    UNION ALL
			    SELECT target, 0, count(*) FROM outbox WHERE state = 'DEAD' GROUP BY target
			) c GROUP BY target`)
		if err == nil {
			for rows.Next() {
				var t string
				var p, d float64
				if rows.Scan(&t, &p, &d) == nil {
					counts[t] = [2]float64{p, d}
				}
			}
			rows.Close()
			err = rows.Err()
		}
		all := append([]string(nil), targets...)
		for t := range counts {
			if !slices.Contains(all, t) {
				all = append(all, t)
			}
		}
		for _, t := range all {
			p, d := counts[t][0], counts[t][1]
			if err != nil {
				p, d = math.NaN(), math.NaN()
			}
			o.ObserveFloat64(pending, p, metric.WithAttributes(attribute.String("target", t)))
			o.ObserveFloat64(dead, d, metric.WithAttributes(attribute.String("target", t)))
		}
		return nil
	}, unfinished, oldest, unmarked, oldestUnmarked, abandoned, pending, dead)
	if err != nil {
		return fmt.Errorf("registering gauges: %w", err)
	}
	return nil
}

// age is the seconds since t, 0 when there is nothing (an empty backlog has
// no oldest message).
func age(now time.Time, t *time.Time) float64 {
	if t == nil {
		return 0
	}
	return max(0, now.Sub(*t).Seconds())
}
