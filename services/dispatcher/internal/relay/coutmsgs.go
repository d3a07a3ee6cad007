package relay

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/outbox"
	"msgexchange/services/internal/sisrequest"
)

// TargetCoutmsgs is the outbox target of outbound requests: pkey is the
// req_track ID, payload the request XML (R-D5).
const TargetCoutmsgs = outbox.Coutmsgs

// Outcomes of coutmsgs rows, recorded in outbox.outcome. A fresh insert is
// OutcomeWritten.
const (
	// OutcomeReused: a COUTMSGS row with the same ROUTINGID and the same
	// XML already existed (an earlier attempt inserted it and crashed before
	// recording it, C-24); its ID was recorded instead of inserting again.
	OutcomeReused = "reused-existing"
	// OutcomeRequestClosed: the request was closed (superseded by a newer
	// request of its scope) before it was sent; it is not sent.
	OutcomeRequestClosed = "request-closed"
	// OutcomeRequestMissing: the request no longer exists (purged).
	OutcomeRequestMissing = "request-missing"
)

// shadowReason closes a request shadow mode settled without sending it.
const shadowReason = "shadow mode: never sent"

// clockSkewMargin widens the duplicate lookup of C-24 back from the
// request's registration: the registration time comes from the control
// plane's clock, COUTMSGS_DATE_INSERTED from the dispatcher's.
const clockSkewMargin = time.Hour

func (r *Relay) coutmsgsService() *lifecycle.Service {
	return lifecycle.NewService("dispatcher-"+TargetCoutmsgs, nil, func(ctx context.Context) error {
		return r.loop(ctx, TargetCoutmsgs, r.DrainCoutmsgs)
	}, nil)
}

// coutmsgsRow is a pending coutmsgs outbox row.
type coutmsgsRow struct {
	id       int64
	pkey     string
	xml      []byte
	attempts int
}

// DrainCoutmsgs inserts one batch of registered requests into COUTMSGS.
// Only after an insert is confirmed (or an identical earlier insert is
// found) are the outbox row marked SENT and the request SENT with its
// COUTMSGS_ID, in one PostgreSQL transaction. Failures back off like the
// other targets and become DEAD after max-attempts, expiring the request as
// undeliverable. Rows are taken in due-time order, so failing rows rotate
// behind fresh ones.
func (r *Relay) DrainCoutmsgs(ctx context.Context) (bool, error) {
	now := r.opt.Clock.Now()
	floor, token := r.floors.start(TargetCoutmsgs)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Fresh rows above the floor in ID order, then the retry lane's due
	// rows in due-time order (see floor.go and migration 00018).
	rows, err := r.reads.Query(qctx, `
		SELECT id, pkey, payload, attempts, next_attempt_at <= $2 FROM outbox
		WHERE target=$1 AND state='PENDING' AND NOT retry AND id > $3
		ORDER BY id LIMIT $4`, TargetCoutmsgs, now, floor, r.opt.Batch)
	if err != nil {
		return false, fmt.Errorf("reading outbound requests: %w", err)
	}
	type laneRequest struct {
		coutmsgsRow
		due bool
	}
	fresh, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (laneRequest, error) {
		var c laneRequest
		return c, row.Scan(&c.id, &c.pkey, &c.xml, &c.attempts, &c.due)
	})
	if err != nil {
		return false, fmt.Errorf("reading outbound requests: %w", err)
	}
	rows, err = r.reads.Query(qctx, `
		SELECT id, pkey, payload, attempts FROM outbox
		WHERE target=$1 AND state='PENDING' AND retry AND next_attempt_at <= $2
		ORDER BY next_attempt_at, id LIMIT $3`, TargetCoutmsgs, now, r.opt.Batch)
	if err != nil {
		return false, fmt.Errorf("reading outbound requests: %w", err)
	}
	retry, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (coutmsgsRow, error) {
		var c coutmsgsRow
		return c, row.Scan(&c.id, &c.pkey, &c.xml, &c.attempts)
	})
	if err != nil {
		return false, fmt.Errorf("reading outbound requests: %w", err)
	}
	more := len(fresh) == r.opt.Batch || len(retry) == r.opt.Batch
	to := floor
	var batch []coutmsgsRow
	for _, c := range fresh {
		if !c.due {
			break
		}
		to = c.id
		batch = append(batch, c.coutmsgsRow)
	}
	batch = append(batch, retry...)
	// The term must be current before the first insert; each insert is
	// then recorded in a fenced transaction before the next one, so the
	// first refusal stops the batch and ends the term (R-H6).
	if len(batch) > 0 {
		if err := r.db(TargetCoutmsgs).Check(ctx); err != nil {
			return false, err
		}
	}
	var lastErr error
	var outage error // the mailbox is unreachable or refuses every row: the rest of the batch waits with it
	for _, c := range batch {
		if outage != nil {
			if ferr := r.coutmsgsFailed(ctx, c, outage); ferr != nil {
				return false, ferr
			}
			continue
		}
		if err := r.sendRequest(ctx, c); err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			if errors.Is(err, lease.ErrFenced) {
				return false, err // never recorded as a failure: the term is over
			}
			lastErr = err
			if classifyMySQL(err).waits() {
				outage = err
			}
			if ferr := r.coutmsgsFailed(ctx, c, err); ferr != nil {
				return false, ferr
			}
			continue
		}
		r.delivered(TargetCoutmsgs)
	}
	if outage == nil && len(batch) > 0 {
		r.outages.ok(TargetCoutmsgs)
	}
	// Every row of the batch is recorded (sent, settled or backed off into
	// the retry lane): the fresh lane's floor passes them.
	r.floors.advance(TargetCoutmsgs, token, to)
	if lastErr != nil {
		return false, fmt.Errorf("writing outbound requests: %w", lastErr)
	}
	return more, nil
}

// sendRequest delivers one row; an error is a retryable failure.
func (r *Relay) sendRequest(ctx context.Context, c coutmsgsRow) error {
	reqID, err := strconv.ParseInt(c.pkey, 10, 64)
	if err != nil {
		return fmt.Errorf("outbox row %d: pkey %q is not a request ID", c.id, c.pkey)
	}
	var typ, state string
	var registered time.Time
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = r.reads.QueryRow(qctx, `SELECT type, state, registered_at FROM req_track WHERE id=$1`, reqID).Scan(&typ, &state, &registered)
	if errors.Is(err, pgx.ErrNoRows) {
		return r.coutmsgsSettled(ctx, c.id, "ABANDONED", OutcomeRequestMissing, reqID)
	}
	if err != nil {
		return fmt.Errorf("reading request %d: %w", reqID, err)
	}
	if state != "REGISTERED" {
		// Superseded before it was sent: a newer request of the scope is
		// on its way, sending this one would only confuse the answer.
		return r.coutmsgsSettled(ctx, c.id, "ABANDONED", OutcomeRequestClosed, reqID)
	}
	if r.opt.Shadow {
		return r.shadowRequest(ctx, c.id, reqID)
	}
	routing, err := sisrequest.RoutingID(typ)
	if err != nil {
		return fmt.Errorf("request %d: %w", reqID, err)
	}
	outboundID, reused, err := r.insertCoutmsgs(ctx, routing, c.xml, registered.Add(-clockSkewMargin))
	if err != nil {
		return fmt.Errorf("inserting request %d into COUTMSGS: %w", reqID, err)
	}
	outcome := OutcomeWritten
	if reused {
		outcome = OutcomeReused
		r.log.Warn("request already in COUTMSGS from an earlier attempt; reusing its row", "request_id", reqID, "coutmsgs_id", outboundID)
	}
	if err := r.recordRequestSent(ctx, c.id, reqID, outboundID, outcome); err != nil {
		return err
	}
	r.log.Info("request inserted into COUTMSGS", "request_id", reqID, "type", typ, "coutmsgs_id", outboundID, "outcome", outcome)
	return nil
}

// recordRequestSent marks outbox row id SENT and its request SENT with its
// COUTMSGS_ID, in one fenced transaction.
func (r *Relay) recordRequestSent(ctx context.Context, id, reqID, outboundID int64, outcome string) error {
	done := r.opt.Clock.Now()
	// A request superseded while its insert ran stays EXPIRED; its row
	// is in COUTMSGS all the same (delivery ends at the mailbox, C-24).
	if err := r.settleRequest(ctx, id, outcome, done, "sent",
		`UPDATE req_track SET state='SENT', sent_at=$2, outbound_id=$3 WHERE id=$1 AND state='REGISTERED'`, reqID, done, outboundID); err != nil {
		return err
	}
	r.sent.Add(ctx, 1, targetAttr(TargetCoutmsgs))
	return nil
}

// settleRequest marks outbox row id SENT with outcome and runs reqSQL on
// its request (what names the step in errors), in one fenced transaction.
func (r *Relay) settleRequest(ctx context.Context, id int64, outcome string, done time.Time, what, reqSQL string, reqArgs ...any) error {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return r.db(TargetCoutmsgs).InTx(tctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(tctx, `UPDATE outbox SET state='SENT', outcome=$2, sent_at=$3, attempts=attempts+1, last_error=NULL WHERE id=$1`,
			id, outcome, done); err != nil {
			return fmt.Errorf("recording outbox row %d %s: %w", id, what, err)
		}
		if _, err := tx.Exec(tctx, reqSQL, reqArgs...); err != nil {
			return fmt.Errorf("recording request %v %s: %w", reqArgs[0], what, err)
		}
		return nil
	})
}

// insertCoutmsgs inserts xml into COUTMSGS under routing and returns the
// new COUTMSGS_ID. If a row with the same ROUTINGID and exactly the same
// XML, inserted at or after since, already exists, its ID is returned with
// reused set and nothing is inserted: the XML carries the request's SEQN
// and DTTM, so an identical row can only be an earlier attempt of the same
// request whose success was never recorded (C-24).
func (r *Relay) insertCoutmsgs(ctx context.Context, routing string, xml []byte, since time.Time) (id int64, reused bool, err error) {
	if err := guardRoutingID(routing); err != nil {
		return 0, false, err
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := r.opt.Mailbox.QueryContext(mctx, `
		SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG FROM COUTMSGS
		WHERE ROUTINGID=? AND COUTMSGS_DATE_INSERTED >= ? AND COUTMSGS_CLOB_MSG=?
		ORDER BY COUTMSGS_ID`, routing, since, string(xml))
	if err != nil {
		return 0, false, fmt.Errorf("looking for an earlier insert: %w", err)
	}
	for rows.Next() {
		var clob sql.NullString
		if err := rows.Scan(&id, &clob); err != nil {
			_ = rows.Close()
			return 0, false, fmt.Errorf("looking for an earlier insert: %w", err)
		}
		// The column's collation may compare loosely; only identical bytes
		// are the same request.
		if clob.Valid && bytes.Equal([]byte(clob.String), xml) {
			_ = rows.Close()
			return id, true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("looking for an earlier insert: %w", err)
	}
	_ = rows.Close()
	now := r.opt.Clock.Now().Truncate(time.Second) // DATETIME; written in the airport zone by the connection
	res, err := r.opt.Mailbox.ExecContext(mctx, `
		INSERT INTO COUTMSGS (COUTMSGS_CLOB_MSG, COUTMSGS_DATE_INSERTED, COUTMSGS_DATE_SENT, ROUTINGID,
			COUTMSGS_TRUEFALS_GROUP, COUTMSGS_FINAL_GROUP_IND, COUTMSGS_ACK_REQD, COUTMSGS_ACK_RESEND_TIMES,
			COUTMSGS_ENCRYPT, COUTMSGS_ERROR, COUTMSGS_NO_MESSAGES, COUTMSGS_GROUP_ORDER, COUTMSGS_GROUP_ID,
			COUTMSGS_ACK_DATE_RECV)
		VALUES (?, ?, NULL, ?, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL)`, string(xml), now, routing)
	if err != nil {
		return 0, false, fmt.Errorf("inserting: %w", err)
	}
	id, err = res.LastInsertId()
	if err != nil {
		return 0, false, fmt.Errorf("reading the new COUTMSGS_ID: %w", err)
	}
	return id, false, nil
}

// shadowRequest settles a request in shadow mode (R-L6) without writing
// COUTMSGS: the outbox row is SENT with outcome shadowed, so it never
// waits for a write, and the request is closed EXPIRED, so its scope is
// free and nothing waits for an answer to a request never sent. Leaving
// shadow mode sends none of them: the predecessor sent its own.
func (r *Relay) shadowRequest(ctx context.Context, id, reqID int64) error {
	done := r.opt.Clock.Now()
	if err := r.settleRequest(ctx, id, OutcomeShadowed, done, "shadowed",
		`UPDATE req_track SET state='EXPIRED', closed_at=$2, closed_reason=$3 WHERE id=$1 AND state='REGISTERED'`, reqID, done, shadowReason); err != nil {
		return err
	}
	r.shadowed.Add(ctx, 1, targetAttr(TargetCoutmsgs))
	r.log.Info("outbound request not sent: shadow mode", "request_id", reqID, "outcome", OutcomeShadowed)
	return nil
}

// coutmsgsSettled ends a row without sending it.
func (r *Relay) coutmsgsSettled(ctx context.Context, id int64, state, outcome string, reqID int64) error {
	if _, err := r.db(TargetCoutmsgs).Exec(ctx, `UPDATE outbox SET state=$2, outcome=$3, sent_at=$4, attempts=attempts+1 WHERE id=$1`,
		id, state, outcome, r.opt.Clock.Now()); err != nil {
		return fmt.Errorf("recording outbox row %d %s: %w", id, outcome, err)
	}
	r.log.Info("outbound request not sent", "request_id", reqID, "outcome", outcome)
	return nil
}

// coutmsgsFailed settles a failed row by its class (R-L2): a transient
// failure (the mailbox or PostgreSQL unreachable) or a stalled one (the
// mailbox refusing the account or missing COUTMSGS, the loop's stall,
// R-L8) waits the target's outage schedule without counting; any other
// backs off by the row's attempts, and
// after max-attempts the row is DEAD (kept as the dead-letter queue) and
// its request expired as undeliverable, so that the scope is free for a
// new request.
func (r *Relay) coutmsgsFailed(ctx context.Context, c coutmsgsRow, cause error) error {
	attempts := c.attempts + 1
	now := r.opt.Clock.Now()
	cl := classifyMySQL(cause)
	r.failed.Add(ctx, 1, classAttrs(TargetCoutmsgs, cl))
	if cl.waits() {
		next := now.Add(r.transientWait(TargetCoutmsgs, r.outages.fail(TargetCoutmsgs)))
		if _, err := r.db(TargetCoutmsgs).Exec(ctx, `UPDATE outbox SET last_error=$2, next_attempt_at=$3, retry=true WHERE id=$1`, c.id, cause.Error(), next); err != nil {
			return fmt.Errorf("recording outbound request failure: %w", err)
		}
		return nil
	}
	if attempts >= r.opt.MaxAttempts {
		r.log.Error("outbound request undeliverable; dead-lettered", "outbox_id", c.id, "request_id", c.pkey, "attempts", attempts, "err", cause, "alert", "request-dead")
		r.dead.Add(ctx, 1, targetAttr(TargetCoutmsgs))
		return r.db(TargetCoutmsgs).InTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE outbox SET state='DEAD', attempts=$2, last_error=$3 WHERE id=$1`, c.id, attempts, cause.Error()); err != nil {
				return fmt.Errorf("recording dead outbound request: %w", err)
			}
			if _, err := tx.Exec(ctx, `
				UPDATE req_track SET state='EXPIRED', closed_at=$2, closed_reason=$3
				WHERE id::text=$1 AND state='REGISTERED'`, c.pkey, now, "undeliverable: "+cause.Error()); err != nil {
				return fmt.Errorf("expiring undeliverable request: %w", err)
			}
			return nil
		})
	}
	next := now.Add(r.delay(attempts, r.opt.BackoffMin, r.opt.BackoffMax))
	r.log.Warn("inserting outbound request failed; will retry", "outbox_id", c.id, "request_id", c.pkey, "attempt", attempts, "next_attempt_at", next, "err", cause)
	if _, err := r.db(TargetCoutmsgs).Exec(ctx, `UPDATE outbox SET attempts=$2, last_error=$3, next_attempt_at=$4, retry=true WHERE id=$1`, c.id, attempts, cause.Error(), next); err != nil {
		return fmt.Errorf("recording outbound request failure: %w", err)
	}
	return nil
}
