package pipeline

import (
	"context"
	"errors"

	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/decide"
)

// snapshotPlan returns the plan of the snapshot msgID, made once per
// message and term (decide.PlanSnapshot) and memorised for its later
// steps.
func (e *Engine) snapshotPlan(ctx context.Context, v decide.SnapshotView, msgID int64, msg *sis.Message) (*decide.SnapshotPlan, error) {
	if pl := e.snapshots.planFor(msgID, msg); pl != nil {
		return pl, nil
	}
	pl, err := decide.PlanSnapshot(ctx, v, msg, e.opday)
	if err != nil {
		return nil, err
	}
	e.plans.Add(1)
	e.snapshots.keepPlan(msgID, pl)
	return pl, nil
}

// snapshotStepDone forgets msgID's snapshot unless its step committed a
// batch and left work: the package ended, or the step failed and its
// transaction rolled back (the next attempt reads the message again).
func (e *Engine) snapshotStepDone(msgID int64, err error) {
	var b *batchCommitted
	if !errors.As(err, &b) {
		e.snapshots.forget(msgID)
	}
}
