package pipeline

import (
	"context"

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
	// Planning takes the records out of msg: the memo must not offer this
	// reading to another attempt until the plan is kept with it, or a step
	// that panicked while planning would leave a message without records
	// for the retry to plan (a package of nothing, or rejected).
	read, kept := e.snapshots.unkeep(msgID, msg)
	pl, err := decide.PlanSnapshot(ctx, v, msg, e.opday)
	if err != nil {
		return nil, err
	}
	e.plans.Add(1)
	runStageHook(ctx, "snapshot planned", msgID)
	if kept {
		e.snapshots.keepPlan(msgID, read, pl)
	}
	return pl, nil
}

// snapshotStepDone forgets msgID's snapshot unless its step wrote a batch
// and left work (out.Continue): the package ended, or the step failed and
// its transaction rolls back (the next attempt reads the message again).
func (e *Engine) snapshotStepDone(msgID int64, out decide.Outcome, err error) {
	if err != nil || out.Continue == "" {
		e.snapshots.forget(msgID)
	}
}
