// Package pace spreads a background job's work over time, so that a job
// that could run flat out — the daily record cleanup and history sweep
// deleting hundreds of thousands of rows — takes at most a share of the
// time of the database it shares with the live pipeline.
//
// The pause after each step is proportional to how long the step took, not
// a fixed rate: when the database is slow (a year of history, a busy disk)
// the steps take longer and the pauses grow with them, so the job backs off
// exactly when the live work needs the room, and on an idle database it
// finishes quickly.
package pace

import (
	"context"
	"fmt"
	"time"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
)

// Pacer runs a job's steps, resting after each one so that the steps take
// at most Share of the wall time. The zero value runs the steps back to
// back (Share 0 or 1: no rest).
type Pacer struct {
	// Share in (0, 1] is the largest part of the time the steps may take:
	// after a step that took d the pacer rests d·(1−Share)/Share (0.25:
	// three times as long as the step). 0 or 1 means no rest.
	Share float64
	// MaxRest caps one rest, so that one slow step does not stall the job
	// for long; 0 means no cap.
	MaxRest time.Duration
	// Clock times the steps; nil means the wall clock.
	Clock clock.Clock
	// Sleep waits between steps and returns early with the context's cause;
	// nil means backoff.Sleep. Tests inject a recorder.
	Sleep func(ctx context.Context, d time.Duration) error
	// Behind, when set, says whether the work the job shares the database
	// with is behind (a backlog waiting longer than it should). After its
	// rest, a step's pacer waits YieldPoll at a time while it is, at most
	// MaxYield in all, so that the job gives way exactly while the live
	// work needs the room. A failing check ends the wait: the job is not
	// stalled by what it cannot read.
	Behind    func(ctx context.Context) (bool, error)
	YieldPoll time.Duration
	MaxYield  time.Duration
}

// Rest returns the rest after a step that took d.
func (p Pacer) Rest(d time.Duration) time.Duration {
	if p.Share <= 0 || p.Share >= 1 || d <= 0 {
		return 0
	}
	r := time.Duration(float64(d) * (1 - p.Share) / p.Share)
	if p.MaxRest > 0 {
		r = min(r, p.MaxRest)
	}
	return r
}

// Step runs fn, then rests in proportion to how long it took. An error of
// fn is returned as is, without a rest; a rest cut short by ctx returns the
// context's cause.
func (p Pacer) Step(ctx context.Context, fn func() error) error {
	c := p.Clock
	if c == nil {
		c = clock.Real{}
	}
	start := c.Now()
	if err := fn(); err != nil {
		return err
	}
	sleep := p.Sleep
	if sleep == nil {
		sleep = backoff.Sleep
	}
	if rest := p.Rest(c.Now().Sub(start)); rest > 0 {
		if err := sleep(ctx, rest); err != nil {
			return fmt.Errorf("pausing between steps: %w", err)
		}
	}
	if p.Behind == nil || p.YieldPoll <= 0 {
		return nil
	}
	for waited := time.Duration(0); waited < p.MaxYield; waited += p.YieldPoll {
		if behind, err := p.Behind(ctx); err != nil || !behind {
			return nil
		}
		if err := sleep(ctx, min(p.YieldPoll, p.MaxYield-waited)); err != nil {
			return fmt.Errorf("giving way to the live work: %w", err)
		}
	}
	return nil
}
