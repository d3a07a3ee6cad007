package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/processor/internal/decide"
)

// Requests is decide's RequestView and RequestSink over a message's
// transaction: it reads and closes requests there, so a close commits with
// the response's data.
type Requests struct {
	Tx    pgx.Tx
	MsgID int64 // the response
	// Timeout is the configured timeout of a request type, the deadline of
	// a SENT request whose timer has not started yet.
	Timeout func(typ string) time.Duration
}

// OpenRequests locks and returns the open (SENT, WAITING) requests of
// typ, of reference type rtyp for RQRD, oldest sent first. REGISTERED
// requests are not open for answers: they are not in the mailbox yet.
func (r Requests) OpenRequests(ctx context.Context, typ, rtyp string) ([]decide.Request, error) {
	rows, err := r.Tx.Query(ctx, `
		SELECT id, COALESCE(stdb, ''), COALESCE(stde, ''), sent_at,
		       COALESCE(timeout_at, sent_at + $3::bigint * interval '1 microsecond')
		FROM req_track
		WHERE type=$1 AND ($2 = '' OR rtyp=$2) AND state IN ('SENT', 'WAITING')
		ORDER BY sent_at, id
		FOR UPDATE`, typ, rtyp, r.Timeout(typ).Microseconds())
	if err != nil {
		return nil, fmt.Errorf("reading open %s requests: %w", typ, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (decide.Request, error) {
		var q decide.Request
		return q, row.Scan(&q.ID, &q.STDB, &q.STDE, &q.SentAt, &q.Deadline)
	})
	if err != nil {
		return nil, fmt.Errorf("reading open %s requests: %w", typ, err)
	}
	return out, nil
}

// ReceivedAt is CMINMSGS_DATE_RECEIVED as registered, or the registration
// time where that is unknown.
func (r Requests) ReceivedAt(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := r.Tx.QueryRow(ctx, `SELECT COALESCE(received_at, registered_at) FROM proc_state WHERE msg_id=$1`, r.MsgID).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("reading receive time of %d: %w", r.MsgID, err)
	}
	return t, nil
}

// RequestState locks request id and returns its state.
func (r Requests) RequestState(ctx context.Context, id int64) (string, string, bool, error) {
	var state, reason string
	err := r.Tx.QueryRow(ctx, `SELECT state, COALESCE(closed_reason, '') FROM req_track WHERE id=$1 FOR UPDATE`, id).Scan(&state, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("reading request %d: %w", id, err)
	}
	return state, reason, true, nil
}

// CloseRequest makes the matched request DONE with the response, in the
// response's transaction, after its data was applied.
func (r Requests) CloseRequest(ctx context.Context, op decide.RequestClose) error {
	tag, err := r.Tx.Exec(ctx, `
		UPDATE req_track SET state='DONE', closed_at=$2, response_msg_id=$3, match_kind=$4, closed_reason=$5
		WHERE id=$1 AND state IN ('SENT', 'WAITING')`,
		op.ID, op.Now, op.MsgID, op.Kind, op.Reason())
	if err != nil {
		return fmt.Errorf("closing %s request %d: %w", op.Type, op.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("closing %s request %d: %w", op.Type, op.ID, decide.ErrRequestNotOpen)
	}
	return nil
}
