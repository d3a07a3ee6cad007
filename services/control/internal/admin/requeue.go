package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/caller"
	"msgexchange/services/control/internal/nullable"
	"msgexchange/services/control/internal/rpcstatus"
	"msgexchange/services/internal/procstate"
)

// Limits of a RequeueOutbox request.
const (
	// MaxRequeueIDs is the most IDs one request may name.
	MaxRequeueIDs = 10000
	// MaxOperatorLen and MaxReasonLen bound the audit texts, in characters.
	MaxOperatorLen = 200
	MaxReasonLen   = 2000
)

// requeueRequest is a validated RequeueOutbox request.
type requeueRequest struct {
	ids      []int64 // sorted, unique; nil for a target request
	target   string
	state    string // DEAD or ABANDONED
	operator string
	reason   string
}

// requeueFrom validates a RequeueOutbox request, reporting every problem.
func requeueFrom(req *controlv1.RequeueOutboxRequest) (requeueRequest, error) {
	var errs []error
	r := requeueRequest{
		target:   strings.TrimSpace(req.GetTarget()),
		operator: strings.TrimSpace(req.GetOperator()),
		reason:   strings.TrimSpace(req.GetReason()),
	}
	switch {
	case r.operator == "":
		errs = append(errs, errors.New("operator: required, name who asks for the re-queue (it is audited)"))
	case utf8.RuneCountInString(r.operator) > MaxOperatorLen:
		errs = append(errs, fmt.Errorf("operator: at most %d characters", MaxOperatorLen))
	}
	switch {
	case r.reason == "":
		errs = append(errs, errors.New("reason: required, say why the rows are re-queued (it is audited)"))
	case utf8.RuneCountInString(r.reason) > MaxReasonLen:
		errs = append(errs, fmt.Errorf("reason: at most %d characters", MaxReasonLen))
	}
	switch {
	case len(req.GetIds()) > 0 && r.target != "":
		errs = append(errs, errors.New("ids and target: give one of them, not both"))
	case len(req.GetIds()) == 0 && r.target == "":
		errs = append(errs, errors.New("ids or target: give the outbox IDs to re-queue, or a target whose rows to re-queue"))
	case len(req.GetIds()) > MaxRequeueIDs:
		errs = append(errs, fmt.Errorf("ids: at most %d per request, got %d", MaxRequeueIDs, len(req.GetIds())))
	}
	for _, id := range req.GetIds() {
		if id <= 0 {
			errs = append(errs, fmt.Errorf("ids: %d is not a positive outbox ID", id))
			break
		}
	}
	switch req.GetState() {
	case controlv1.OutboxState_OUTBOX_STATE_UNSPECIFIED, controlv1.OutboxState_OUTBOX_STATE_DEAD:
		r.state = "DEAD"
	case controlv1.OutboxState_OUTBOX_STATE_ABANDONED:
		r.state = "ABANDONED"
	default:
		errs = append(errs, fmt.Errorf("state %s: only DEAD or ABANDONED rows can be re-queued", req.GetState()))
	}
	if len(errs) > 0 {
		return requeueRequest{}, errors.Join(errs...)
	}
	if len(req.GetIds()) > 0 {
		r.ids = slices.Compact(slices.Sorted(slices.Values(req.GetIds())))
	}
	return r, nil
}

// RequeueOutbox puts DEAD (or ABANDONED) outbox rows back to PENDING with
// attempts reset and next_attempt_at now, records the call in
// outbox_requeue_audit and wakes the dispatcher, all in one transaction.
func (s *Server) RequeueOutbox(ctx context.Context, req *controlv1.RequeueOutboxRequest) (*controlv1.RequeueOutboxResponse, error) {
	r, err := requeueFrom(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	now := s.clock.Now()
	var (
		moved   []int64
		auditID int64
	)
	err = pgx.BeginFunc(qctx, s.db, func(tx pgx.Tx) error {
		var err error
		moved, auditID, err = requeue(qctx, tx, r, now)
		return err
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "re-queueing outbox rows", err, "operator", r.operator)
	}
	resp := &controlv1.RequeueOutboxResponse{Requeued: int64(len(moved)), RequeuedIds: moved, AuditId: auditID}
	if r.ids != nil {
		for _, id := range r.ids {
			if _, found := slices.BinarySearch(moved, id); !found {
				resp.SkippedIds = append(resp.SkippedIds, id)
			}
		}
	}
	s.logger.Info("outbox rows re-queued", "operator", r.operator, "reason", r.reason, "target", r.target,
		"state", r.state, "requeued", len(moved), "skipped", len(resp.SkippedIds), "audit_id", auditID)
	return resp, nil
}

// requeue moves the rows, writes the audit row and notifies the
// dispatcher (an UPDATE does not fire the outbox insert trigger). It
// returns the moved IDs in ascending order and the audit ID.
func requeue(ctx context.Context, tx pgx.Tx, r requeueRequest, now time.Time) ([]int64, int64, error) {
	const set = `UPDATE outbox
SET state = 'PENDING', attempts = 0, next_attempt_at = $1, outcome = NULL, sent_at = NULL
WHERE state = $2 AND `
	var (
		rows pgx.Rows
		err  error
	)
	if r.ids != nil {
		rows, err = tx.Query(ctx, set+`id = ANY($3) RETURNING id`, now, r.state, r.ids)
	} else {
		rows, err = tx.Query(ctx, set+`target = $3 RETURNING id`, now, r.state, r.target)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("moving rows to PENDING: %w", err)
	}
	moved, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, 0, fmt.Errorf("moving rows to PENDING: %w", err)
	}
	slices.Sort(moved)
	if moved == nil {
		moved = []int64{}
	}
	if r.state == "ABANDONED" && len(moved) > 0 {
		// A re-queued abandoned backfill is unfinished again: its message
		// returns to the unmarked backlog until the marker is recorded.
		if err := procstate.ReopenBackfills(ctx, tx, moved); err != nil {
			return nil, 0, err
		}
	}
	var auditID int64
	c := caller.From(ctx)
	err = tx.QueryRow(ctx, `INSERT INTO outbox_requeue_audit (at, operator, reason, outbox_ids, principal, peer) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
		now, r.operator, r.reason, moved, c.Principal, c.Peer).Scan(&auditID)
	if err != nil {
		return nil, 0, fmt.Errorf("recording the re-queue audit: %w", err)
	}
	if len(moved) > 0 {
		if _, err := tx.Exec(ctx, `SELECT pg_notify('msgx_outbox', '')`); err != nil {
			return nil, 0, fmt.Errorf("waking the dispatcher: %w", err)
		}
	}
	return moved, auditID, nil
}

// ListAbandonedBackfills returns one page of abandoned backfills (outbox
// rows of target mailbox in state ABANDONED) in ascending ID order.
func (s *Server) ListAbandonedBackfills(ctx context.Context, req *controlv1.ListAbandonedBackfillsRequest) (*controlv1.ListAbandonedBackfillsResponse, error) {
	limit, err := pageLimit(req.GetLimit())
	if err == nil && req.GetAfterId() < 0 {
		err = fmt.Errorf("after_id %d: must not be negative", req.GetAfterId())
	}
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	entries, err := queryAbandoned(qctx, s.db, req.GetAfterId(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing abandoned backfills", err)
	}
	resp := &controlv1.ListAbandonedBackfillsResponse{Entries: entries}
	if len(entries) > limit {
		resp.Entries = entries[:limit]
		resp.NextAfterId = resp.Entries[limit-1].GetId()
	}
	return resp, nil
}

// pageLimit applies the listing limits: 0 means DefaultOutboxLimit, more
// than MaxOutboxLimit is reduced, negative is refused.
func pageLimit(limit int32) (int, error) {
	switch {
	case limit < 0:
		return 0, fmt.Errorf("limit %d: must not be negative (0 means %d)", limit, DefaultOutboxLimit)
	case limit == 0:
		return DefaultOutboxLimit, nil
	default:
		return min(int(limit), MaxOutboxLimit), nil
	}
}

// queryAbandoned reads up to n abandoned backfills after afterID.
func queryAbandoned(ctx context.Context, db pgxQuerier, afterID int64, n int) ([]*controlv1.AbandonedBackfill, error) {
	rows, err := db.Query(ctx, `
SELECT id, msg_id, created_at, sent_at, outcome, attempts, last_error
FROM outbox
WHERE state = 'ABANDONED' AND target = 'mailbox' AND id > $1
ORDER BY id
LIMIT $2`, afterID, n)
	if err != nil {
		return nil, fmt.Errorf("querying abandoned backfills: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*controlv1.AbandonedBackfill, error) {
		var (
			e                controlv1.AbandonedBackfill
			msgID            *int64
			created          time.Time
			abandoned        *time.Time
			outcome, lastErr *string
		)
		if err := row.Scan(&e.Id, &msgID, &created, &abandoned, &outcome, &e.Attempts, &lastErr); err != nil {
			return nil, fmt.Errorf("reading abandoned backfill: %w", err)
		}
		if msgID != nil {
			e.MsgId = *msgID
		}
		e.CreatedAt = timestamppb.New(created)
		e.AbandonedAt = nullable.Timestamp(abandoned)
		e.Outcome = nullable.String(outcome)
		e.LastError = nullable.String(lastErr)
		return &e, nil
	})
}

// pgxQuerier is the part of a pool or transaction the listings use.
type pgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
