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

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/caller"
	"msgexchange/services/control/internal/rpcstatus"
	"msgexchange/services/internal/procstate"
)

// Audit actions of outbox_discard_audit.
const (
	actionDiscard     = "discard"
	actionAcknowledge = "acknowledge"
)

// closeRequest is a validated DiscardOutbox or AcknowledgeBackfills
// request: the rows to move to DISCARDED and who asks, and why.
type closeRequest struct {
	action   string
	ids      []int64 // sorted, unique; nil for a target request
	target   string
	operator string
	reason   string
}

// auditTexts validates the operator and reason every audited close needs;
// verb names the action in the messages.
func auditTexts(operator, reason, verb string) []error {
	var errs []error
	switch {
	case operator == "":
		errs = append(errs, fmt.Errorf("operator: required, name who asks for the %s (it is audited)", verb))
	case utf8.RuneCountInString(operator) > MaxOperatorLen:
		errs = append(errs, fmt.Errorf("operator: at most %d characters", MaxOperatorLen))
	}
	switch {
	case reason == "":
		errs = append(errs, fmt.Errorf("reason: required, say why (the %s is audited)", verb))
	case utf8.RuneCountInString(reason) > MaxReasonLen:
		errs = append(errs, fmt.Errorf("reason: at most %d characters", MaxReasonLen))
	}
	return errs
}

// idList validates requested outbox IDs and returns them sorted and unique.
func idList(ids []int64) ([]int64, []error) {
	var errs []error
	if len(ids) > MaxRequeueIDs {
		errs = append(errs, fmt.Errorf("ids: at most %d per request, got %d", MaxRequeueIDs, len(ids)))
	}
	for _, id := range ids {
		if id <= 0 {
			errs = append(errs, fmt.Errorf("ids: %d is not a positive outbox ID", id))
			break
		}
	}
	if len(ids) == 0 || len(errs) > 0 {
		return nil, errs
	}
	return slices.Compact(slices.Sorted(slices.Values(ids))), nil
}

// discardFrom validates a DiscardOutbox request, reporting every problem.
func discardFrom(req *controlv1.DiscardOutboxRequest) (closeRequest, error) {
	r := closeRequest{
		action:   actionDiscard,
		target:   strings.TrimSpace(req.GetTarget()),
		operator: strings.TrimSpace(req.GetOperator()),
		reason:   strings.TrimSpace(req.GetReason()),
	}
	errs := auditTexts(r.operator, r.reason, "discard")
	switch {
	case len(req.GetIds()) > 0 && r.target != "":
		errs = append(errs, errors.New("ids and target: give one of them, not both"))
	case len(req.GetIds()) == 0 && r.target == "":
		errs = append(errs, errors.New("ids or target: give the outbox IDs to discard, or a target whose DEAD rows to discard"))
	}
	ids, idErrs := idList(req.GetIds())
	errs = append(errs, idErrs...)
	if len(errs) > 0 {
		return closeRequest{}, errors.Join(errs...)
	}
	r.ids = ids
	return r, nil
}

// acknowledgeFrom validates an AcknowledgeBackfills request, reporting
// every problem.
func acknowledgeFrom(req *controlv1.AcknowledgeBackfillsRequest) (closeRequest, error) {
	r := closeRequest{
		action:   actionAcknowledge,
		operator: strings.TrimSpace(req.GetOperator()),
		reason:   strings.TrimSpace(req.GetReason()),
	}
	errs := auditTexts(r.operator, r.reason, "acknowledgement")
	if len(req.GetIds()) == 0 {
		errs = append(errs, errors.New("ids: required, give the outbox IDs of the abandoned backfills to acknowledge"))
	}
	ids, idErrs := idList(req.GetIds())
	errs = append(errs, idErrs...)
	if len(errs) > 0 {
		return closeRequest{}, errors.Join(errs...)
	}
	r.ids = ids
	return r, nil
}

// DiscardOutbox moves DEAD outbox rows to DISCARDED, finishes the
// backfill of every discarded mailbox marker with outcome "discarded" and
// records the call in outbox_discard_audit, all in one transaction. The
// dead-letter queue otherwise only ever shrinks by a re-queue, so a row
// nobody needs would keep msgx_outbox_dead (and its alert) up for good.
func (s *Server) DiscardOutbox(ctx context.Context, req *controlv1.DiscardOutboxRequest) (*controlv1.DiscardOutboxResponse, error) {
	r, err := discardFrom(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	moved, skipped, auditID, err := s.closeRows(ctx, r)
	if err != nil {
		return nil, err
	}
	return &controlv1.DiscardOutboxResponse{Discarded: int64(len(moved)), DiscardedIds: moved, SkippedIds: skipped, AuditId: auditID}, nil
}

// AcknowledgeBackfills moves abandoned backfills (ABANDONED mailbox rows)
// to DISCARDED and records the call in outbox_discard_audit, in one
// transaction. An abandoned backfill is final by design, so without an
// acknowledgement msgx_backfill_abandoned (and its alert) would never go
// down; the message's backfill stays finished with outcome "abandoned".
func (s *Server) AcknowledgeBackfills(ctx context.Context, req *controlv1.AcknowledgeBackfillsRequest) (*controlv1.AcknowledgeBackfillsResponse, error) {
	r, err := acknowledgeFrom(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	moved, skipped, auditID, err := s.closeRows(ctx, r)
	if err != nil {
		return nil, err
	}
	return &controlv1.AcknowledgeBackfillsResponse{Acknowledged: int64(len(moved)), AcknowledgedIds: moved, SkippedIds: skipped, AuditId: auditID}, nil
}

// closeRows runs one validated close in a transaction and logs it; it
// returns the moved IDs, the requested IDs that were not moved and the
// audit ID.
func (s *Server) closeRows(ctx context.Context, r closeRequest) ([]int64, []int64, int64, error) {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	now := s.clock.Now()
	var (
		moved   []int64
		auditID int64
	)
	err := pgx.BeginFunc(qctx, s.db, func(tx pgx.Tx) error {
		var err error
		moved, auditID, err = closeOutbox(qctx, tx, r, now)
		return err
	})
	if err != nil {
		return nil, nil, 0, rpcstatus.QueryError(s.logger, "closing outbox rows", err, "action", r.action, "operator", r.operator)
	}
	var skipped []int64
	for _, id := range r.ids {
		if _, found := slices.BinarySearch(moved, id); !found {
			skipped = append(skipped, id)
		}
	}
	s.logger.Info("outbox rows closed", "action", r.action, "operator", r.operator, "reason", r.reason, "target", r.target,
		"closed", len(moved), "skipped", len(skipped), "audit_id", auditID)
	return moved, skipped, auditID, nil
}

// closeOutbox moves the selected rows to DISCARDED, finishes the backfill
// of discarded mailbox markers and writes the audit row. Only DEAD rows
// are discarded and only ABANDONED mailbox rows acknowledged, whatever the
// IDs name. It returns the moved IDs in ascending order and the audit ID.
func closeOutbox(ctx context.Context, tx pgx.Tx, r closeRequest, now time.Time) ([]int64, int64, error) {
	var (
		rows pgx.Rows
		err  error
	)
	switch {
	case r.action == actionAcknowledge:
		rows, err = tx.Query(ctx, `UPDATE outbox SET state = 'DISCARDED'
WHERE state = 'ABANDONED' AND target = 'mailbox' AND id = ANY($1) RETURNING id, target, msg_id`, r.ids)
	case r.ids != nil:
		rows, err = tx.Query(ctx, `UPDATE outbox SET state = 'DISCARDED'
WHERE state = 'DEAD' AND id = ANY($1) RETURNING id, target, msg_id`, r.ids)
	default:
		rows, err = tx.Query(ctx, `UPDATE outbox SET state = 'DISCARDED'
WHERE state = 'DEAD' AND target = $1 RETURNING id, target, msg_id`, r.target)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("moving rows to DISCARDED: %w", err)
	}
	type closed struct {
		id     int64
		target string
		msgID  *int64
	}
	done, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (closed, error) {
		var c closed
		return c, row.Scan(&c.id, &c.target, &c.msgID)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("moving rows to DISCARDED: %w", err)
	}
	moved := make([]int64, 0, len(done))
	var markers []int64
	for _, c := range done {
		moved = append(moved, c.id)
		if r.action == actionDiscard && c.target == "mailbox" && c.msgID != nil {
			markers = append(markers, *c.msgID)
		}
	}
	slices.Sort(moved)
	if r.action == actionDiscard && len(moved) > 0 {
		// A discarded flight-state row is never projected, so no ack will
		// satisfy the projection its message waits for: the wait is
		// released with it, and the processor's self-check finishes a
		// message left APPLIED with nothing pending, as its last ack would
		// have (R-L2, R-H4). A requeued row needs nothing: its delivery is
		// acknowledged like any other.
		if _, err := tx.Exec(ctx, `DELETE FROM projection_pending p USING outbox o
WHERE o.id = ANY($1) AND o.target = 'flight-state' AND p.msg_id = o.msg_id AND p.flid::text = o.pkey`, moved); err != nil {
			return nil, 0, fmt.Errorf("releasing the projections of discarded flight-state rows: %w", err)
		}
	}
	if len(markers) > 0 {
		// A discarded marker is a finished backfill: the message leaves the
		// unmarked backlog (proc_state_unmarked_idx) for good.
		if err := procstate.DiscardBackfills(ctx, tx, markers, now); err != nil {
			return nil, 0, err
		}
	}
	var auditID int64
	c := caller.From(ctx)
	err = tx.QueryRow(ctx, `INSERT INTO outbox_discard_audit (at, action, operator, reason, outbox_ids, principal, peer)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		now, r.action, r.operator, r.reason, moved, c.Principal, c.Peer).Scan(&auditID)
	if err != nil {
		return nil, 0, fmt.Errorf("recording the %s audit: %w", r.action, err)
	}
	return moved, auditID, nil
}
