package pipeline

import (
	"context"
	"errors"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/progress"
)

// Services returns the processor's lifecycle services. With an elector it
// is one service that waits as standby until it holds the processor lease
// and then runs every loop for as long as the term lasts; each term starts
// the loops afresh, so positions are read from PostgreSQL after the lease is
// won (the previous holder may have moved them).
//
// A term ends when the elector loses the lease, and also at once when any
// transaction of the term is refused by the fence (R-H6): the refusal
// cancels the term's context, so every loop stops before it can repeat
// anything under the old token, and the elector goes back to standby and
// tries to acquire again.
func (e *Engine) Services() []*lifecycle.Service {
	if e.opt.Elector == nil {
		return e.loops()
	}
	holder := e.opt.Holder
	if holder == "" {
		holder = lease.Holder()
	}
	return []*lifecycle.Service{lifecycle.NewService("processor-leader", nil, func(svcCtx context.Context) error {
		// A loop stalled past its limit ends the process, not only the
		// term, so that the supervisor restarts it (R-L8).
		runCtx, stalled := context.WithCancelCause(svcCtx)
		defer stalled(nil)
		err := e.opt.Elector.Run(runCtx, LeaseName, holder, func(ctx context.Context, token int64) error {
			tctx, end := e.db.Start(ctx, token)
			defer end()
			e.log.Info("processor lease acquired; active", "token", token, "holder", holder)
			err := lifecycle.NewManager(e.log, e.loops()...).Run(tctx)
			// The loops have stopped: the term is over, nothing of this
			// instance executes any more, and no marker of it may stay to
			// be charged as a crash by the next holder (R-L2).
			end()
			e.withdrawMarkers(svcCtx)
			if errors.Is(err, progress.ErrStalled) {
				stalled(err)
			} else {
				e.standby() // a loop that does not run cannot stall
			}
			if cause := context.Cause(tctx); errors.Is(cause, lease.ErrFenced) {
				e.log.Warn("processor term ended: a fenced write was refused; standby", "token", token, "err", cause,
					"alert", "processor-fenced")
				return errors.Join(cause, err)
			}
			e.log.Info("processor term ended; standby", "token", token, "err", err)
			return err
		})
		if cause := context.Cause(runCtx); errors.Is(cause, progress.ErrStalled) {
			return cause
		}
		return err
	}, nil)}
}

// loops returns the processor's loops in start order.
func (e *Engine) loops() []*lifecycle.Service {
	return []*lifecycle.Service{
		e.executorService(),
		e.acksService(),
		e.inboxService(),
		e.maintenanceService(),
		e.requestsService(),
	}
}
