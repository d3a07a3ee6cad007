package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/sis"
	"msgexchange/services/internal/sisrequest"
	"msgexchange/services/processor/internal/apply"
	"msgexchange/services/processor/internal/decide"
)

// Defaults of the request options, used where Options leave them zero.
const (
	DefaultRQFDTimeout          = 60 * time.Second
	DefaultRQRDTimeout          = 30 * time.Second
	DefaultRequestRetention     = 7 * 24 * time.Hour
	DefaultRequestSweepInterval = time.Second
)

// Match kinds recorded in req_track.match_kind (C-23), see decide.
const (
	MatchExact    = decide.MatchExact
	MatchFallback = decide.MatchFallback
)

// requestTimeout is the configured timeout of a request type.
func (e *Engine) requestTimeout(typ string) time.Duration {
	if typ == sisrequest.TypeRQFD {
		return orDefault(e.opt.RQFDTimeout, DefaultRQFDTimeout)
	}
	return orDefault(e.opt.RQRDTimeout, DefaultRQRDTimeout)
}

// requests is the request matching of the message of w, reading and
// writing its transaction.
func (e *Engine) requests(w *writer) *decide.Requests {
	rq := apply.Requests{Tx: w.tx, MsgID: w.msgID, Timeout: e.requestTimeout}
	return &decide.Requests{View: rq, Sink: rq, Zone: e.zone(), MsgID: w.msgID, Now: w.now, Log: e.log}
}

// scheduleResponse applies one step of an SCHD RESP (R-C7) with
// decide.ScheduleResponse: only as the answer to an open RQFD request, as
// a snapshot like DNLD, closing the request in the step that finishes the
// package.
func (e *Engine) scheduleResponse(ctx context.Context, w *writer, msg *sis.Message) (decide.Outcome, error) {
	st := apply.Snapshot{Tx: w.tx, MsgID: w.msgID, Now: w.now}
	plan := func(ctx context.Context) (*decide.SnapshotPlan, error) { return e.snapshotPlan(ctx, st, w.msgID, msg) }
	out, err := w.overlaid(ctx, func() (decide.Outcome, error) {
		return decide.ScheduleResponse(ctx, w.Writer, st, st, e.requests(w), msg, plan, e.snapshotBatch())
	})
	e.snapshotStepDone(w.msgID, out, err)
	return out, err
}

// airport formats t in the airport zone for reasons and logs.
func (e *Engine) airport(t time.Time) string {
	return t.In(e.zone()).Format(time.DateTime)
}

// SweepResult reports what one request sweep did.
type SweepResult struct {
	// Armed is the number of SENT requests whose timeout started (WAITING).
	Armed int64
	// Expired is the number of WAITING requests that timed out.
	Expired int64
	// Purged is the number of closed requests deleted after the retention.
	Purged int64
}

// SweepRequests runs the request timers at the injected clock's now, in one
// transaction: SENT requests become WAITING with timeout_at = sent_at +
// request.rqfd-timeout / rqrd-timeout; WAITING requests past timeout_at
// become EXPIRED (closed_reason "timeout") — unless a message that reached
// the mailbox by the deadline is still waiting in the FIFO, since it may be
// the answer; closed requests whose closed_at is older than
// request.retention are deleted (G-REQ-TRACK-RETENTION).
func (e *Engine) SweepRequests(ctx context.Context) (SweepResult, error) {
	now := e.clock.Now()
	var res SweepResult
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := e.inTx(qctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(qctx, `
			UPDATE req_track SET state='WAITING',
				timeout_at = sent_at + (CASE type WHEN 'RQFD' THEN $1::bigint ELSE $2::bigint END) * interval '1 microsecond'
			WHERE state='SENT'`,
			e.requestTimeout(sisrequest.TypeRQFD).Microseconds(), e.requestTimeout(sisrequest.TypeRQRD).Microseconds())
		if err != nil {
			return fmt.Errorf("arming request timeouts: %w", err)
		}
		res.Armed = tag.RowsAffected()
		rows, err := tx.Query(qctx, `
			UPDATE req_track r SET state='EXPIRED', closed_at=$1, closed_reason='timeout'
			WHERE r.state='WAITING' AND r.timeout_at <= $1
			  AND NOT EXISTS (SELECT 1 FROM proc_state p WHERE p.state IN ('PENDING', 'FAILED')
			                  AND COALESCE(p.received_at, p.registered_at) <= r.timeout_at)
			RETURNING r.id, r.type, r.timeout_at`, now)
		if err != nil {
			return fmt.Errorf("expiring requests: %w", err)
		}
		type expired struct {
			id       int64
			typ      string
			deadline time.Time
		}
		gone, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (expired, error) {
			var x expired
			return x, row.Scan(&x.id, &x.typ, &x.deadline)
		})
		if err != nil {
			return fmt.Errorf("expiring requests: %w", err)
		}
		for _, x := range gone {
			e.log.Warn("request expired without an answer", "request_id", x.id, "type", x.typ, "timeout_at", e.airport(x.deadline))
		}
		res.Expired = int64(len(gone))
		tag, err = tx.Exec(qctx, `DELETE FROM req_track WHERE state IN ('DONE', 'EXPIRED') AND closed_at < $1`,
			now.Add(-orDefault(e.opt.RequestRetention, DefaultRequestRetention)))
		if err != nil {
			return fmt.Errorf("purging closed requests: %w", err)
		}
		res.Purged = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return SweepResult{}, err
	}
	if res.Purged > 0 {
		e.log.Info("closed requests purged", "count", res.Purged, "retention", orDefault(e.opt.RequestRetention, DefaultRequestRetention))
	}
	return res, nil
}

// requestsService sweeps the request timers every request.sweep-interval.
func (e *Engine) requestsService() *lifecycle.Service {
	return lifecycle.NewService("processor-requests", nil, func(ctx context.Context) error {
		t := time.NewTicker(orDefault(e.opt.RequestSweepInterval, DefaultRequestSweepInterval))
		defer t.Stop()
		for {
			if _, err := e.SweepRequests(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("sweeping request timers; retrying", "err", err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}, nil)
}
