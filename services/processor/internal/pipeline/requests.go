package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/sis"
	"msgexchange/services/internal/sisrequest"
)

// Defaults of the request options, used where Options leave them zero.
const (
	DefaultRQFDTimeout          = 60 * time.Second
	DefaultRQRDTimeout          = 30 * time.Second
	DefaultRequestRetention     = 7 * 24 * time.Hour
	DefaultRequestSweepInterval = time.Second
)

// Match kinds recorded in req_track.match_kind (C-23).
const (
	// MatchExact: the response echoed the request's window (SCHD/STDB and
	// SCHD/STDE equal to the request's).
	MatchExact = "exact"
	// MatchFallback: no echo; the oldest open request of the same type and
	// scope sent no later than the response's DTTM. Not a proven
	// correlation; recorded and logged for audit.
	MatchFallback = "fallback"
)

// openRequest is an open (SENT or WAITING) request a response may answer.
type openRequest struct {
	id       int64
	stdb     string
	stde     string
	sentAt   time.Time
	deadline time.Time
}

// requestMatch is the request a response answers.
type requestMatch struct {
	id         int64
	kind       string
	candidates int // eligible open requests (fallback only)
	// stored: the match was made by an earlier step of the message (an
	// SCHD RESP's first batch) and read from its progress, so the request
	// is not locked and may have been closed since.
	stored bool
}

// requestTimeout is the configured timeout of a request type.
func (e *Engine) requestTimeout(typ string) time.Duration {
	if typ == sisrequest.TypeRQFD {
		return orDefault(e.opt.RQFDTimeout, DefaultRQFDTimeout)
	}
	return orDefault(e.opt.RQRDTimeout, DefaultRQRDTimeout)
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// scheduleResponse applies an SCHD RESP (R-C7): only as the answer to an
// open RQFD request, as a snapshot exactly like DNLD, and closes that
// request in the step that writes the terminal state. Without a match it
// is SKIPPED with the reason and nothing is written.
//
// The match is made once, by the step that writes the package's first
// batch, and stored with the progress (R-C6): every later batch, a resumed
// run after a failure and a replayed run continue under it and never match
// again. A package is therefore never left half written and SKIPPED
// because its request was closed between batches — superseded by a newer
// request, expired, or closed by an operator. Such a request stays closed
// (a late answer never changes a closed request, R-D5); the package is
// finished all the same and its reason says so.
func (e *Engine) scheduleResponse(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	p, err := loadProgress(ctx, w)
	if err != nil {
		return outcome{}, err
	}
	if p.match != nil {
		e.log.Info("SCHD RESP continues under the RQFD request matched at its first batch",
			"msg_id", w.msgID, "request_id", p.match.id, "match_kind", p.match.kind, "records_written", p.next, "batches", p.batches)
	} else {
		m, skip, err := e.matchRQFD(ctx, w, msg)
		if err != nil {
			return outcome{}, err
		}
		if skip != "" {
			return outcome{}, &skipError{Reason: "SCHD RESP without a matching open RQFD request: " + skip}
		}
		p.match = m
	}
	out, err := e.applySnapshot(ctx, w, msg, p)
	if err != nil {
		return out, err
	}
	note, err := e.closeAnswered(ctx, w, p.match)
	if err != nil {
		return outcome{}, err
	}
	out.note += note
	return out, nil
}

// closeAnswered closes the RQFD request m once the whole package was
// applied and returns the reason's suffix. A request matched in this
// transaction is locked and open, and closeRequest closes it. A stored
// match (see scheduleResponse) may name a request that was closed, or
// purged after request.retention, between the batches: it is left as it
// is, and the suffix and a warning say so.
func (e *Engine) closeAnswered(ctx context.Context, w *writer, m *requestMatch) (string, error) {
	answered := fmt.Sprintf("; answers RQFD request %d (%s match)", m.id, m.kind)
	if !m.stored {
		return answered, e.closeRequest(ctx, w, sisrequest.TypeRQFD, m)
	}
	var (
		closed              bool
		state, closedReason string
	)
	err := w.tx.QueryRow(ctx, `
		WITH done AS (
			UPDATE req_track SET state='DONE', closed_at=$2, response_msg_id=$3, match_kind=$4, closed_reason=$5
			WHERE id=$1 AND state IN ('SENT', 'WAITING')
			RETURNING id)
		SELECT true, 'DONE', '' FROM done
		UNION ALL
		SELECT false, state, COALESCE(closed_reason, '') FROM req_track WHERE id=$1 AND NOT EXISTS (SELECT 1 FROM done)`,
		m.id, w.now, w.msgID, m.kind, fmt.Sprintf("answered by message %d (%s match)", w.msgID, m.kind)).Scan(&closed, &state, &closedReason)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		e.log.Warn("SCHD RESP finished; the RQFD request it answered is no longer tracked (purged)",
			"msg_id", w.msgID, "request_id", m.id, "match_kind", m.kind)
		return answered + ", no longer tracked when the package finished", nil
	case err != nil:
		return "", fmt.Errorf("closing RQFD request %d: %w", m.id, err)
	case closed:
		e.log.Info("request answered", "msg_id", w.msgID, "request_id", m.id, "type", sisrequest.TypeRQFD, "match_kind", m.kind)
		return answered, nil
	}
	e.log.Warn("SCHD RESP finished; the RQFD request it answered was closed while the package was written and stays closed",
		"msg_id", w.msgID, "request_id", m.id, "match_kind", m.kind, "request_state", state, "closed_reason", closedReason)
	return answered + fmt.Sprintf(", which was closed meanwhile (%s: %s) and stays closed", state, clip.N(closedReason, 200)), nil
}

// answerRQRD closes the open RQRD request a reference RESP answers, if
// any, after the RESP was applied (R-D5). The RESP is applied either way
// (R-C10: a RESP replaces its type like a DNLD); the returned note suffix
// says which request it answered.
func (e *Engine) answerRQRD(ctx context.Context, w *writer, msg *sis.Message) (string, error) {
	typ := msg.Meta.TYPE
	open, err := e.openRequests(ctx, w, sisrequest.TypeRQRD, typ)
	if err != nil {
		return "", err
	}
	if len(open) == 0 {
		e.log.Info("reference RESP without an open RQRD request; applied as an unsolicited snapshot", "msg_id", w.msgID, "type", typ)
		return "", nil
	}
	received, err := e.receivedAt(ctx, w)
	if err != nil {
		return "", err
	}
	m, why := e.fallback(msg, open, received)
	if m == nil {
		e.log.Info("reference RESP matches no open RQRD request; applied as an unsolicited snapshot", "msg_id", w.msgID, "type", typ, "why", why)
		return "", nil
	}
	if err := e.closeRequest(ctx, w, sisrequest.TypeRQRD, m); err != nil {
		return "", err
	}
	return fmt.Sprintf("; answers RQRD request %d (%s match)", m.id, m.kind), nil
}

// matchRQFD finds the open RQFD request an SCHD RESP answers (C-23). An
// echo of the window (SCHD/STDB and SCHD/STDE both present) is
// authoritative: it matches only the open request of exactly that window.
// Without an echo the fallback applies. A request matches only while the
// response arrived (mailbox receive time) no later than its deadline. The
// result is a match, or a reason for skipping.
func (e *Engine) matchRQFD(ctx context.Context, w *writer, msg *sis.Message) (*requestMatch, string, error) {
	open, err := e.openRequests(ctx, w, sisrequest.TypeRQFD, "")
	if err != nil {
		return nil, "", err
	}
	if len(open) == 0 {
		return nil, "no RQFD request is open", nil
	}
	received, err := e.receivedAt(ctx, w)
	if err != nil {
		return nil, "", err
	}
	schd := msg.Root.Child("SCHD")
	stdb, stde := schd.Child("STDB").Value(), schd.Child("STDE").Value()
	if stdb != "" && stde != "" {
		for _, r := range open {
			if strings.TrimSpace(r.stdb) != stdb || strings.TrimSpace(r.stde) != stde {
				continue
			}
			if received.After(r.deadline) {
				return nil, fmt.Sprintf("echoed window %s..%s is RQFD request %d's, but the response arrived at %s, after its deadline %s",
					stdb, stde, r.id, e.airport(received), e.airport(r.deadline)), nil
			}
			e.log.Info("SCHD RESP matched its RQFD request by the echoed window", "msg_id", w.msgID, "request_id", r.id, "stdb", stdb, "stde", stde)
			return &requestMatch{id: r.id, kind: MatchExact}, "", nil
		}
		return nil, fmt.Sprintf("echoed window %s..%s matches none of the %d open RQFD requests", stdb, stde, len(open)), nil
	}
	m, why := e.fallback(msg, open, received)
	if m == nil {
		return nil, why, nil
	}
	return m, "", nil
}

// fallback picks the oldest open request sent no later than the response's
// DTTM (compared in the airport zone, at whole seconds: DTTM has no
// fractions) whose deadline the response's arrival did not pass. It logs
// the match as a fallback (C-23: accepted, audited, not a proven
// correlation).
func (e *Engine) fallback(msg *sis.Message, open []openRequest, received time.Time) (*requestMatch, string) {
	dttm, err := sisrequest.ParseDTTM(msg.Meta.DTTM, e.zone())
	if err != nil {
		return nil, "no echo and " + err.Error() + ", so the response cannot be placed after a request"
	}
	var eligible []openRequest
	late := 0
	for _, r := range open {
		if r.sentAt.Truncate(time.Second).After(dttm) {
			continue
		}
		if received.After(r.deadline) {
			late++
			continue
		}
		eligible = append(eligible, r)
	}
	if len(eligible) == 0 {
		if late > 0 {
			return nil, fmt.Sprintf("the response arrived at %s, after the deadline of every open request sent by its DTTM %s", e.airport(received), msg.Meta.DTTM)
		}
		return nil, fmt.Sprintf("every open request was sent after the response's DTTM %s", msg.Meta.DTTM)
	}
	m := &requestMatch{id: eligible[0].id, kind: MatchFallback, candidates: len(eligible)}
	e.log.Warn("response matched by fallback (same type, open, DTTM at or after sending): not a proven correlation",
		"type", msg.Meta.TYPE, "styp", msg.Meta.STYP, "seqn", msg.Meta.SEQN, "dttm", msg.Meta.DTTM,
		"request_id", m.id, "sent_at", e.airport(eligible[0].sentAt), "candidates", m.candidates, "audit", "request-fallback-match")
	return m, ""
}

// openRequests locks and returns the open (SENT, WAITING) requests of typ,
// of reference type rtyp for RQRD, oldest sent first. REGISTERED requests
// are not open for answers: they are not in the mailbox yet.
func (e *Engine) openRequests(ctx context.Context, w *writer, typ, rtyp string) ([]openRequest, error) {
	rows, err := w.tx.Query(ctx, `
		SELECT id, COALESCE(stdb, ''), COALESCE(stde, ''), sent_at,
		       COALESCE(timeout_at, sent_at + $3::bigint * interval '1 microsecond')
		FROM req_track
		WHERE type=$1 AND ($2 = '' OR rtyp=$2) AND state IN ('SENT', 'WAITING')
		ORDER BY sent_at, id
		FOR UPDATE`, typ, rtyp, e.requestTimeout(typ).Microseconds())
	if err != nil {
		return nil, fmt.Errorf("reading open %s requests: %w", typ, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (openRequest, error) {
		var r openRequest
		return r, row.Scan(&r.id, &r.stdb, &r.stde, &r.sentAt, &r.deadline)
	})
	if err != nil {
		return nil, fmt.Errorf("reading open %s requests: %w", typ, err)
	}
	return out, nil
}

// receivedAt is when the message reached the mailbox (CMINMSGS_DATE_RECEIVED),
// or when the processor registered it where that is unknown. Deadlines are
// judged by it, so a response that arrived in time is not lost to a busy
// processor.
func (e *Engine) receivedAt(ctx context.Context, w *writer) (time.Time, error) {
	var t time.Time
	if err := w.tx.QueryRow(ctx, `SELECT COALESCE(received_at, registered_at) FROM proc_state WHERE msg_id=$1`, w.msgID).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("reading receive time of %d: %w", w.msgID, err)
	}
	return t, nil
}

// closeRequest makes the matched request DONE with the response, in the
// response's transaction, after its data was applied.
func (e *Engine) closeRequest(ctx context.Context, w *writer, typ string, m *requestMatch) error {
	tag, err := w.tx.Exec(ctx, `
		UPDATE req_track SET state='DONE', closed_at=$2, response_msg_id=$3, match_kind=$4, closed_reason=$5
		WHERE id=$1 AND state IN ('SENT', 'WAITING')`,
		m.id, w.now, w.msgID, m.kind, fmt.Sprintf("answered by message %d (%s match)", w.msgID, m.kind))
	if err != nil {
		return fmt.Errorf("closing %s request %d: %w", typ, m.id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("closing %s request %d: %w", typ, m.id, errRequestNotOpen)
	}
	e.log.Info("request answered", "msg_id", w.msgID, "request_id", m.id, "type", typ, "match_kind", m.kind)
	return nil
}

// errRequestNotOpen means a locked open request was found closed: a bug.
var errRequestNotOpen = errors.New("request is no longer open")

// zone is the airport zone in which DTTM is read.
func (e *Engine) zone() *time.Location {
	if e.opt.Zone != nil {
		return e.opt.Zone
	}
	return time.UTC
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
