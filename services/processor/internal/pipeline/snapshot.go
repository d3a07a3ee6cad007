package pipeline

import (
	"context"

	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/apply"
	"msgexchange/services/processor/internal/decide"
)

// DefaultSnapshotBatch is how many records (flights written or deleted) one
// transaction of a daily snapshot holds when Options.SnapshotBatch is 0.
const DefaultSnapshotBatch = 200

// DefaultMaxRecords is pipeline.max-records when Options.MaxRecords is 0:
// well above the largest real airport day (a few thousand flights), so
// that only a message no AODB sends — a runaway export, a broken
// generator — is refused before it occupies the FIFO for minutes (R-K4).
const DefaultMaxRecords = 50000

// maxRecords is the configured limit of records per message.
func (e *Engine) maxRecords() int {
	if e.opt.MaxRecords > 0 {
		return e.opt.MaxRecords
	}
	return DefaultMaxRecords
}

// snapshotBatch is the configured batch size.
func (e *Engine) snapshotBatch() int {
	if e.opt.SnapshotBatch > 0 {
		return e.opt.SnapshotBatch
	}
	return DefaultSnapshotBatch
}

// snapshot applies one step of a daily snapshot (SCHD DNLD) in batches
// (R-C6) with decide.Snapshot.
func (e *Engine) snapshot(ctx context.Context, w *writer, msg *sis.Message) (decide.Outcome, error) {
	st := apply.Snapshot{Tx: w.tx, MsgID: w.msgID, Now: w.now}
	p, err := st.Progress(ctx)
	if err != nil {
		return decide.Outcome{}, err
	}
	pl, err := e.snapshotPlan(ctx, st, w.msgID, msg)
	if err != nil {
		e.snapshotStepDone(w.msgID, decide.Outcome{}, err)
		return decide.Outcome{}, err
	}
	out, err := w.overlaid(ctx, func() (decide.Outcome, error) {
		return decide.SnapshotStep(ctx, w.Writer, st, st, pl, p, e.snapshotBatch())
	})
	e.snapshotStepDone(w.msgID, out, err)
	return out, err
}
