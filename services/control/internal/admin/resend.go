package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/caller"
	"msgexchange/services/control/internal/rpcstatus"
)

// MaxResendRows is the most rows one ResendOutbox call moves, as many as
// a re-queue may name. A broker's lost tail is seconds to minutes of
// records; a bounded call keeps its transaction and its audit row small
// and within the query timeout — 100,000 rows a call took more than the
// 10 s default under load — and a larger window is sent in several calls
// (ResendOutboxResponse.more), which msgxctl makes.
const MaxResendRows = 10000

// resendTargets are the targets whose rows go to Kafka: the only ones a
// broker can lose. mailbox (markers) and coutmsgs (requests to the AODB)
// are written to the mailbox database, and a request sent twice is asked
// twice.
var resendTargets = []string{"flight-state", "msg", "schd", "projection-control"}

// resendRequest is a validated ResendOutbox request.
type resendRequest struct {
	target       string
	since, until time.Time
	operator     string
	reason       string
}

// resendFrom validates a ResendOutbox request received at now, reporting
// every problem.
func resendFrom(req *controlv1.ResendOutboxRequest, now time.Time) (resendRequest, error) {
	r := resendRequest{
		target:   strings.TrimSpace(req.GetTarget()),
		operator: strings.TrimSpace(req.GetOperator()),
		reason:   strings.TrimSpace(req.GetReason()),
		until:    now,
	}
	errs := auditTexts(r.operator, r.reason, "re-send")
	switch {
	case r.target == "":
		errs = append(errs, fmt.Errorf("target: required, one of %s", strings.Join(resendTargets, ", ")))
	case !slices.Contains(resendTargets, r.target):
		errs = append(errs, fmt.Errorf("target %q: only the Kafka targets can be re-sent (%s); mailbox markers and COUTMSGS requests are written to the mailbox database",
			r.target, strings.Join(resendTargets, ", ")))
	}
	if req.GetSentSince() == nil {
		errs = append(errs, errors.New("sent_since: required, the earliest time the broker may have lost records from"))
	} else {
		r.since = req.GetSentSince().AsTime()
	}
	if req.GetSentUntil() != nil {
		r.until = req.GetSentUntil().AsTime()
	}
	if req.GetSentSince() != nil && !r.since.Before(r.until) {
		errs = append(errs, fmt.Errorf("sent_since %s: must be before sent_until %s", r.since.Format(time.RFC3339Nano), r.until.Format(time.RFC3339Nano)))
	}
	if len(errs) > 0 {
		return resendRequest{}, errors.Join(errs...)
	}
	return r, nil
}

// ResendOutbox puts the SENT rows of a Kafka target sent in a window back
// to PENDING, oldest first and at most MaxResendRows, records the call in
// outbox_requeue_audit and wakes the dispatcher, all in one transaction.
// The rows join the retry lane (the outbox_requeued trigger), below the
// dispatcher's fresh-lane floor, and hold back their keys' later rows
// until they are produced (relay.kafkaFreshQuery), so each key's records
// go out again in order.
func (s *Server) ResendOutbox(ctx context.Context, req *controlv1.ResendOutboxRequest) (*controlv1.ResendOutboxResponse, error) {
	now := s.clock.Now()
	r, err := resendFrom(req, now)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	if req.GetDryRun() {
		var matched int64
		if err := s.db.QueryRow(qctx, resendCount, r.target, r.since, r.until).Scan(&matched); err != nil {
			return nil, rpcstatus.QueryError(s.logger, "counting outbox rows to re-send", err, "operator", r.operator)
		}
		return &controlv1.ResendOutboxResponse{Matched: matched, SentUntil: timestamppb.New(r.until)}, nil
	}
	var (
		moved   []int64
		more    bool
		auditID int64
	)
	err = pgx.BeginFunc(qctx, s.db, func(tx pgx.Tx) error {
		var err error
		moved, more, auditID, err = resend(qctx, tx, r, now)
		return err
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "re-sending outbox rows", err, "operator", r.operator)
	}
	resp := &controlv1.ResendOutboxResponse{Resent: int64(len(moved)), More: more, SentUntil: timestamppb.New(r.until), AuditId: auditID}
	if len(moved) > 0 {
		resp.FirstId, resp.LastId = moved[0], moved[len(moved)-1]
	}
	s.logger.Info("outbox rows re-sent", "operator", r.operator, "reason", r.reason, "target", r.target,
		"sent_since", r.since, "sent_until", r.until, "resent", len(moved), "more", more, "audit_id", auditID)
	return resp, nil
}

// resendSelect reads the IDs of the window's rows, locking them against
// the record cleanup's deletion. The target's delivered rows are read in
// full: no index holds them by sent_at, and one would cost every delivery
// an index entry for an operator's rare call. They are the rows of the
// record retention (30 days by default), read once.
const resendSelect = `SELECT id ` + resendWindow + ` ORDER BY id LIMIT $4 FOR UPDATE`

// resendWindow selects the SENT rows of target $1 sent in [$2, $3).
const resendWindow = `FROM outbox WHERE target = $1 AND state = 'SENT' AND sent_at >= $2 AND sent_at < $3`

// resendCount counts the window's rows (a dry run).
const resendCount = `SELECT count(*) ` + resendWindow

// resend moves the window's rows, writes the audit row and notifies the
// dispatcher. It returns the moved IDs in ascending order, whether the
// window holds more, and the audit ID.
func resend(ctx context.Context, tx pgx.Tx, r resendRequest, now time.Time) ([]int64, bool, int64, error) {
	rows, err := tx.Query(ctx, resendSelect, r.target, r.since, r.until, MaxResendRows+1)
	if err != nil {
		return nil, false, 0, fmt.Errorf("reading the window's rows: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, false, 0, fmt.Errorf("reading the window's rows: %w", err)
	}
	more := len(ids) > MaxResendRows
	ids = ids[:min(len(ids), MaxResendRows)]
	moved := []int64{}
	if len(ids) > 0 {
		rows, err = tx.Query(ctx, `UPDATE outbox
SET state = 'PENDING', attempts = 0, next_attempt_at = $1, outcome = NULL, sent_at = NULL
WHERE id = ANY($2) AND state = 'SENT' RETURNING id`, now, ids)
		if err != nil {
			return nil, false, 0, fmt.Errorf("moving rows to PENDING: %w", err)
		}
		if moved, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return nil, false, 0, fmt.Errorf("moving rows to PENDING: %w", err)
		}
		slices.Sort(moved)
	}
	var auditID int64
	c := caller.From(ctx)
	err = tx.QueryRow(ctx, `INSERT INTO outbox_requeue_audit (at, action, operator, reason, outbox_ids, principal, peer, target, sent_since, sent_until)
VALUES ($1, 'resend', $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
		now, r.operator, r.reason, moved, c.Principal, c.Peer, r.target, r.since, r.until).Scan(&auditID)
	if err != nil {
		return nil, false, 0, fmt.Errorf("recording the re-send audit: %w", err)
	}
	if len(moved) > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_notify('msgx_outbox', '')`); err != nil {
			return nil, false, 0, fmt.Errorf("waking the dispatcher: %w", err)
		}
	}
	return moved, more, auditID, nil
}
