package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"msgexchange/libs/clip"
	"msgexchange/libs/pgxutil"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/audit"
	"msgexchange/services/control/internal/caller"
	"msgexchange/services/control/internal/nullable"
	"msgexchange/services/control/internal/rpcstatus"
	"msgexchange/services/internal/procstate"
)

// ClassOperator is the error class of a message an operator ended
// (proc_state.error_class, ERROR_CLASS_OPERATOR).
const ClassOperator = "OPERATOR"

// MaxEndLockWait bounds how long EndMessage waits for the message's row
// lock, which the processor holds while it executes the message (for a
// snapshot batch, as long as the batch takes). The wait is also at most
// half the query timeout, so that a lock still held ends the call with
// ABORTED ("retry") rather than a bare timeout.
const MaxEndLockWait = 5 * time.Second

// endAuditPurpose says, in the message of a missing operator or reason,
// what is recorded.
const endAuditPurpose = "who ends a message and why is recorded in message_end_audit and in the message's reason"

// SQLSTATEs that mean "the row stayed locked, try again": the lock timeout
// ran out (55P03) or a deadlock was broken (40P01).
const (
	sqlLockNotAvailable = "55P03"
	sqlDeadlock         = "40P01"
)

// openStates are the unfinished states EndMessage accepts; the others
// (SUCCEEDED, SKIPPED, DEAD) are terminal and final (INV-6).
var openStates = []string{"PENDING", "FAILED", "APPLIED"}

// previousState is what an ended message was before.
type previousState struct {
	state    string
	class    *string
	reason   *string
	attempts int32
	finished *time.Time
}

// EndMessage ends one unfinished message as DEAD(OPERATOR) with its
// backfill intent and an audit row, in one transaction.
//
// Why the control plane writes proc_state here, when replay leaves that to
// the processor: the message to end is typically the FIFO head the
// executor is stuck on (failing, in backoff, or APPLIED waiting for an
// acknowledgement that does not come), and an operator needs it gone now,
// whether or not a processor runs. The row lock makes this safe against
// the executor: its transaction on the message locks the row first (its
// first statement updates it), so this call either waits for that
// transaction and then sees its outcome — a terminal state is refused, an
// open one (APPLIED, or a snapshot still between batches) is ended — or
// commits first, after which every write of the executor that makes the
// message APPLIED or terminal matches no row and rolls its transaction
// back. Batches of a snapshot committed before are business effects already
// published; they stay.
func (s *Server) EndMessage(ctx context.Context, req *controlv1.EndMessageRequest) (*controlv1.EndMessageResponse, error) {
	errs := audit.Validate(req.GetOperator(), req.GetReason(), endAuditPurpose)
	if req.GetMsgId() <= 0 {
		errs = append([]error{fmt.Errorf("msg_id %d: must be a positive mailbox ID", req.GetMsgId())}, errs...)
	}
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	id := req.GetMsgId()
	operator, reason := strings.TrimSpace(req.GetOperator()), strings.TrimSpace(req.GetReason())
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	lockWait := max(min(MaxEndLockWait, s.queryTimeout/2), time.Millisecond)
	now := s.clock.Now()
	var (
		prev previousState
		resp *controlv1.EndMessageResponse
	)
	err := pgxutil.InTx(qctx, s.db, func(tx pgx.Tx) error {
		var err error
		prev, resp, err = endMessage(qctx, tx, id, operator, reason, now, lockWait)
		return err
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, errMessageNotFound):
		return nil, status.Errorf(codes.NotFound, "message %d not found: never registered by the processor, or already cleaned up", id)
	case errors.Is(err, errMessageTerminal):
		return nil, terminalStatus(id, prev)
	case errors.As(err, &pgErr) && (pgErr.Code == sqlLockNotAvailable || pgErr.Code == sqlDeadlock):
		s.logger.Info("ending message: its row stayed locked; the caller retries", "msg_id", id, "err", err)
		return nil, status.Errorf(codes.Aborted,
			"message %d is being executed by the processor right now (its row stayed locked for %s); retry in a moment (%v)", id, lockWait, err)
	case errors.Is(err, errRowChangedUnderLock):
		s.logger.Error("ending message failed", "msg_id", id, "err", err)
		return nil, status.Errorf(codes.Internal, "ending message: %v", err)
	case err != nil:
		return nil, rpcstatus.QueryError(s.logger, "ending message", err, "msg_id", id, "operator", operator)
	}
	s.logger.Warn("message ended by operator", "msg_id", id, "previous_state", prev.state,
		"previous_class", derefOr(prev.class, "none"), "operator", clip.Text(operator), "reason", clip.Text(reason),
		"audit_id", resp.GetAudit().GetId(), "backfill_outbox_id", resp.GetAudit().GetBackfillOutboxId())
	return resp, nil
}

// endMessage does EndMessage's database work in tx. It returns
// errMessageNotFound for an unknown message, and errMessageTerminal (with the
// state in prev) for a terminal one.
func endMessage(ctx context.Context, tx pgx.Tx, id int64, operator, reason string, now time.Time, lockWait time.Duration) (previousState, *controlv1.EndMessageResponse, error) {
	var prev previousState
	ms := max((lockWait+time.Millisecond-1)/time.Millisecond, 1)
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", ms)); err != nil {
		return prev, nil, fmt.Errorf("setting lock timeout: %w", err)
	}
	// The row lock: waits for a processor transaction on the message, then
	// reads its outcome.
	err := tx.QueryRow(ctx, `SELECT state, error_class, reason, attempts, finished_at FROM proc_state WHERE msg_id = $1 FOR UPDATE`, id).
		Scan(&prev.state, &prev.class, &prev.reason, &prev.attempts, &prev.finished)
	if errors.Is(err, pgx.ErrNoRows) {
		return prev, nil, fmt.Errorf("locking message %d: %w", id, errMessageNotFound)
	}
	if err != nil {
		return prev, nil, fmt.Errorf("locking message %d: %w", id, err)
	}
	if !slices.Contains(openStates, prev.state) {
		return prev, nil, fmt.Errorf("ending message %d in state %s: %w", id, prev.state, errMessageTerminal)
	}
	// The terminal state and its backfill intent in one statement (INV-8),
	// exactly as the processor writes every terminal state: the mailbox
	// marker is then written by the dispatcher like for any DEAD message,
	// and the insert wakes it (outbox_notify_trg).
	stored := clip.Text(fmt.Sprintf("ended by operator %s (was %s%s): %s", operator, prev.state, classSuffix(prev.class), reason))
	var ended []procstate.Ended
	b := &pgx.Batch{}
	procstate.QueueEnd(b, []procstate.End{{MsgID: id, Class: ClassOperator, Reason: stored}}, now, func(e []procstate.Ended) error {
		ended = e
		return nil
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return prev, nil, fmt.Errorf("writing DEAD and the backfill intent of message %d: %w", id, err)
	}
	if len(ended) != 1 {
		// The state changed under the row lock: impossible, so it is
		// reported as the internal failure it is, never as success.
		return prev, nil, fmt.Errorf("writing DEAD and the backfill intent of message %d: %w", id, errRowChangedUnderLock)
	}
	outboxID := ended[0].OutboxID
	// The progress of a snapshot written in batches belongs to a run that
	// will not resume. Its pending projections stay: acknowledgements
	// remove them as usual (and the record cleanup with the message);
	// deleting them here would lock them after the message row, the
	// opposite order of the acknowledgement transaction, risking deadlocks.
	if _, err := tx.Exec(ctx, `DELETE FROM snapshot_progress WHERE msg_id = $1`, id); err != nil {
		return prev, nil, fmt.Errorf("dropping snapshot progress of message %d: %w", id, err)
	}
	a := &controlv1.MessageEndAudit{
		MsgId: id, Operator: operator, Reason: reason, PreviousAttempts: prev.attempts,
		PreviousReason: nullable.String(prev.reason), At: timestamppb.New(now), BackfillOutboxId: outboxID,
	}
	if a.PreviousState, err = messageStateFromDB(prev.state); err != nil {
		return prev, nil, err
	}
	if a.PreviousClass, err = errorClassFromDB(prev.class); err != nil {
		return prev, nil, err
	}
	c := caller.From(ctx)
	err = tx.QueryRow(ctx, `
		INSERT INTO message_end_audit (msg_id, operator, reason, previous_state, previous_class, previous_attempts,
			previous_reason, backfill_outbox_id, at, principal, peer)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
		id, operator, reason, prev.state, prev.class, prev.attempts, prev.reason, outboxID, now, c.Principal, c.Peer).Scan(&a.Id)
	if err != nil {
		return prev, nil, fmt.Errorf("recording the end audit of message %d: %w", id, err)
	}
	m, err := queryMessage(ctx, tx, id, false)
	if err != nil {
		return prev, nil, fmt.Errorf("reading ended message %d: %w", id, err)
	}
	return prev, &controlv1.EndMessageResponse{Message: m, Audit: a}, nil
}

// terminalStatus is the FAILED_PRECONDITION of a message that is already
// terminal, with what to do instead.
func terminalStatus(id int64, prev previousState) error {
	since := ""
	if prev.finished != nil {
		since = fmt.Sprintf(" since %s", prev.finished.UTC().Format(time.RFC3339))
	}
	return status.Errorf(codes.FailedPrecondition,
		"message %d is already %s%s%s: terminal states are final, only an unfinished message (%s) can be ended; "+
			"to process it again use replay (msgxctl replay preview %d shows whether it is replayable)",
		id, prev.state, classSuffix(prev.class), since, strings.Join(openStates, ", "), id)
}

// classSuffix is " CLASS" for a recorded error class, "" for none.
func classSuffix(class *string) string {
	if class == nil {
		return ""
	}
	return " " + *class
}

func derefOr(s *string, none string) string {
	if s == nil {
		return none
	}
	return *s
}
