package kafka

import (
	"context"
	"time"

	"msgexchange/libs/backoff"
)

// PollWait paces a consuming loop after its polls, the one rule every poll
// loop of the services follows: after a poll that brought errors and no
// record it waits Retry's next step, so that a client failing at once (a
// refused group join, an unreachable broker) is not polled and logged in a
// tight loop; after a poll without an error it starts the schedule over, so
// that the first failure after a healthy stretch waits 100 ms again, not
// the last outage's second. A wait that grew to seconds and was reset only
// by records let a loop sleep through its broker's return (R-M3).
//
// A PollWait belongs to one loop; it is not safe for concurrent use.
type PollWait struct {
	b     *backoff.Backoff
	sleep func(context.Context, time.Duration) error // backoff.Sleep; tests record
}

// NewPollWait returns the wait of a loop that has not polled yet.
func NewPollWait() *PollWait { return &PollWait{b: Retry.Start(), sleep: backoff.Sleep} }

// After is called after each poll with the poll's last error (nil for
// none, as FetchErrors returns it, the ends of polls the loop cut short
// left out) and how many records it brought. It returns at once, or after
// the wait; an error only when ctx ended during the wait.
func (w *PollWait) After(ctx context.Context, failed error, records int) error {
	switch {
	case failed == nil:
		w.b.Reset()
		return nil
	case records > 0:
		return nil // the records are progress: handle them before waiting
	}
	return w.sleep(ctx, w.b.Next())
}
