package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/kafka"
	"msgexchange/libs/progress"
)

// DefaultStallLimit is the default of Options.StallLimit: how long a
// Kafka loop of the processor may be refused by the broker before its
// service ends, so that the supervisor restarts the process (R-L8).
const DefaultStallLimit = time.Minute

// pollTick bounds each poll of a Kafka loop, so that a loop on a quiet
// topic still reports, at least this often, whether the broker serves it.
const pollTick = 2 * time.Second

// poll polls cl for at most pollTick.
func poll(ctx context.Context, cl *kgo.Client) kgo.Fetches {
	pctx, cancel := context.WithTimeout(ctx, pollTick)
	defer cancel()
	return cl.PollFetches(pctx)
}

// Progress is nil while every Kafka loop of the processor can make
// progress, and otherwise an error wrapping progress.ErrStalled that names
// the loop, how long and why: the processor is then not ready (R-L8).
func (e *Engine) Progress() error { return progress.Check(e.loopProgress...) }

// polled reports a poll of loop t: a refusal that waiting does not cure
// (an authorization failure, an unsupported request) stalls it, a poll
// without errors is progress, and an unreachable broker is neither — the
// loop resumes by itself when the broker returns. It logs the poll's
// errors, waits after a poll that brought only errors (w), and returns
// an error wrapping progress.ErrStalled once the loop has been stalled for
// StallLimit: the loop's service then ends.
func (e *Engine) polled(ctx context.Context, t *progress.Tracker, w *kafka.PollWait, fetches kgo.Fetches) error {
	var last error
	_, permanent := kafka.FetchErrors(fetches, func(topic string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return // a quiet poll ended by its tick (poll), or stopping
		}
		if e.lostRecordsSeen(ctx, t.Name(), topic, p, err) {
			return // information: the client resumed already
		}
		last = err
		e.log.Warn("fetching "+topic, "loop", t.Name(), "partition", p, "err", err)
	})
	switch {
	case permanent != nil:
		t.Stalled(permanent)
		if err := t.Exceeded(orDefault(e.opt.StallLimit, DefaultStallLimit)); err != nil {
			return err
		}
	case last == nil:
		t.Progressed()
	}
	_ = w.After(ctx, last, fetches.NumRecords()) // ends early only when stopping
	return nil
}

// standby clears the loops' stalls when a term ends for another reason
// than a stall: a standby runs no loop that could be refused.
func (e *Engine) standby() {
	for _, t := range e.loopProgress {
		t.Progressed()
	}
}
