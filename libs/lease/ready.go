package lease

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// answers records when the control plane last answered a lease call of
// this process — a grant, a renewal, or a refusal (held elsewhere, term
// lost): any answer shows that the lease API and its database respond.
type answers struct {
	last atomic.Int64 // unix nanoseconds of the last answer, or of the Elector's creation
}

func (a *answers) answered() { a.last.Store(time.Now().UnixNano()) }

// Ready reports whether the control plane answered a lease call of this
// process within the TTL (R-M2): when it did not, an active instance has
// lost its term (its renewals got no answer before the local deadline)
// and a standby could not take over, so the instance does no work and
// must say so on /readyz. A new Elector is ready for one TTL before its
// first answer; an Elector that runs no lease is always ready.
func (e *Elector) Ready() error {
	if e.holding.running() == 0 {
		return nil
	}
	since := time.Since(time.Unix(0, e.answers.last.Load()))
	if since <= e.opt.TTL {
		return nil
	}
	return fmt.Errorf("lease: the control plane answered no lease call for %s (ttl %s): %w", since.Round(time.Second), e.opt.TTL, errNoAnswer)
}

var errNoAnswer = errors.New("no term can be held")
