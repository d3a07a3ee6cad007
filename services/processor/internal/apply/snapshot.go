package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/procstate"
	"msgexchange/services/processor/internal/decide"
)

// Snapshot is a snapshot's SnapshotView and SnapshotSink over the
// message's transaction.
type Snapshot struct {
	Tx    pgx.Tx
	MsgID int64
	Now   time.Time
}

// Progress reads the progress row; counters written under another
// processing_started_at are of a run before an operator replay and are
// ignored, the request match is kept.
func (s Snapshot) Progress(ctx context.Context) (decide.Progress, error) {
	var (
		p         decide.Progress
		current   bool
		requestID *int64
		matchKind *string
	)
	err := s.Tx.QueryRow(ctx, `
		SELECT sp.next_record, sp.changed, sp.deleted, sp.batches,
		       sp.started_at IS NOT DISTINCT FROM ps.processing_started_at, sp.request_id, sp.match_kind
		FROM snapshot_progress sp JOIN proc_state ps ON ps.msg_id = sp.msg_id
		WHERE sp.msg_id=$1`, s.MsgID).
		Scan(&p.Next, &p.Changed, &p.Deleted, &p.Batches, &current, &requestID, &matchKind)
	if errors.Is(err, pgx.ErrNoRows) {
		return decide.Progress{}, nil
	}
	if err != nil {
		return decide.Progress{}, fmt.Errorf("reading snapshot progress: %w", err)
	}
	if !current {
		p = decide.Progress{}
	}
	if requestID != nil && matchKind != nil {
		p.Match = &decide.RequestMatch{ID: *requestID, Kind: *matchKind, Stored: true}
	}
	return p, nil
}

// OperationDays reads the stored operation days of flids in one query.
func (s Snapshot) OperationDays(ctx context.Context, flids []int64) ([]decide.StoredDay, error) {
	rows, err := s.Tx.Query(ctx, `SELECT flid, operation_day FROM flight WHERE flid = ANY($1) AND operation_day IS NOT NULL ORDER BY flid`, flids)
	if err != nil {
		return nil, fmt.Errorf("reading operation days: %w", err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (decide.StoredDay, error) {
		var d decide.StoredDay
		err := r.Scan(&d.FLID, &d.Day)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading operation days: %w", err)
	}
	return got, nil
}

// AbsentFlights lists ACTIVE flights of days not in keep.
func (s Snapshot) AbsentFlights(ctx context.Context, days []time.Time, keep []int64, limit int) ([]int64, error) {
	rows, err := s.Tx.Query(ctx, `SELECT flid FROM flight WHERE state='ACTIVE' AND operation_day = ANY($1) AND NOT (flid = ANY($2))
		ORDER BY flid LIMIT $3`, days, keep, limit)
	if err != nil {
		return nil, fmt.Errorf("listing flights absent from the snapshot: %w", err)
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("listing flights absent from the snapshot: %w", err)
	}
	return gone, nil
}

// ProjectionsPending reads whether the message has a pending projection.
func (s Snapshot) ProjectionsPending(ctx context.Context) (bool, error) {
	var pending bool
	if err := s.Tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projection_pending WHERE msg_id=$1)`, s.MsgID).Scan(&pending); err != nil {
		return false, fmt.Errorf("reading pending projections: %w", err)
	}
	return pending, nil
}

// SaveProgress upserts the progress row under the current run's
// processing_started_at and sets the message's reason, in one round trip.
func (s Snapshot) SaveProgress(ctx context.Context, p decide.Progress, note string) error {
	var requestID *int64
	var matchKind *string
	if p.Match != nil {
		requestID, matchKind = &p.Match.ID, &p.Match.Kind
	}
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO snapshot_progress (msg_id, started_at, next_record, changed, deleted, batches, updated_at, request_id, match_kind)
		SELECT msg_id, processing_started_at, $2, $3, $4, $5, $6, $7, $8 FROM proc_state WHERE msg_id=$1
		ON CONFLICT (msg_id) DO UPDATE SET started_at=EXCLUDED.started_at, next_record=EXCLUDED.next_record,
			changed=EXCLUDED.changed, deleted=EXCLUDED.deleted, batches=EXCLUDED.batches, updated_at=EXCLUDED.updated_at,
			request_id=EXCLUDED.request_id, match_kind=EXCLUDED.match_kind`,
		s.MsgID, p.Next, p.Changed, p.Deleted, p.Batches, s.Now, requestID, matchKind)
	procstate.QueueNote(b, s.MsgID, note, s.Now)
	if err := s.Tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("saving snapshot progress: %w", err)
	}
	return nil
}

// LogSnapshot writes the finished package's row of snapshot_log: its run
// started when the message's current run did (processing_started_at).
func (s Snapshot) LogSnapshot(ctx context.Context, sum decide.SnapshotSummary) error {
	if _, err := s.Tx.Exec(ctx, `
		INSERT INTO snapshot_log (msg_id, styp, days, records, changed, deleted, unchanged, batches, started_at, finished_at, outcome)
		SELECT msg_id, $10, $2, $3, $4, $5, $6, $7, COALESCE(processing_started_at, $8), $8, $9
		FROM proc_state WHERE msg_id=$1`,
		s.MsgID, sum.Days, sum.Records, sum.Changed, sum.Deleted, sum.Unchanged, sum.Batches, s.Now, sum.Outcome, sum.Styp); err != nil {
		return fmt.Errorf("logging snapshot of message %d: %w", s.MsgID, err)
	}
	return nil
}

// ClearProgress deletes the progress row.
func (s Snapshot) ClearProgress(ctx context.Context) error {
	if _, err := s.Tx.Exec(ctx, `DELETE FROM snapshot_progress WHERE msg_id=$1`, s.MsgID); err != nil {
		return fmt.Errorf("clearing snapshot progress: %w", err)
	}
	return nil
}
