package relay

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"msgexchange/libs/clock"
	"msgexchange/libs/kafka"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/progress"
)

// DefaultStallLimit is the default of Options.StallLimit: how long a
// target's loop may stay stalled before its service ends, so that the
// supervisor restarts the process (R-L8).
const DefaultStallLimit = time.Minute

// refusedPG are the PostgreSQL SQLSTATEs of a server that answers but
// refuses the dispatcher what it asks, the same on every try until an
// operator changes the grants, the credentials or the schema: insufficient
// privilege (42501), an unknown table or column (42P01, 42703), an unknown
// database (3D000) and refused credentials (28000, 28P01).
var refusedPG = map[string]bool{
	"42501": true, "42P01": true, "42703": true, "3D000": true, "28000": true, "28P01": true,
}

// pgRefused reports whether err is one of refusedPG.
func pgRefused(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && refusedPG[pe.Code]
}

// stalls reports whether a drain's error says that the target's loop
// cannot make progress (R-L8): the broker refuses the producer as a whole
// (kafka.StallsLoop: an authorization failure, an unsupported request —
// not a record too large, which is that record's dead letter), the mailbox
// refuses access or misses its table (mysqlutil.AccessRefused), or
// PostgreSQL refuses the outbox (pgRefused). A fenced producer is the
// term's to handle (R-H6), and an unreachable dependency is an outage that
// the loop outlasts by itself (R-L2): neither is a stall.
func stalls(err error) bool {
	if err == nil || fenced(err) {
		return false
	}
	return kafka.StallsLoop(err) || mysqlutil.AccessRefused(err) || pgRefused(err)
}

// newProgress returns the tracker of every target's loop, named
// dispatcher-<target>.
func newProgress(clk clock.Clock) map[string]*progress.Tracker {
	out := make(map[string]*progress.Tracker, len(targets))
	for _, t := range targets {
		out[t] = progress.New("dispatcher-"+t, clk)
	}
	return out
}

// ListenLoop names the notification listener's loop (listenService) in
// readiness answers and in the loop metrics.
const ListenLoop = "dispatcher-listen"

// Progress is nil while every target's loop and the notification
// listener can make progress, and otherwise an error wrapping
// progress.ErrStalled that names the loop, how long and why: the
// dispatcher is then not ready (R-L8).
func (r *Relay) Progress() error { return progress.Check(r.trackers()...) }

// trackers returns the loops' trackers in target order, then the
// listener's.
func (r *Relay) trackers() []*progress.Tracker {
	out := make([]*progress.Tracker, 0, len(targets)+1)
	for _, t := range targets {
		out = append(out, r.progress[t])
	}
	return append(out, r.listenProgress)
}

// delivered records that target accepted what its loop sent (a record
// produced, a marker written or found written, a request inserted, or in
// shadow mode settled): the loop progresses.
func (r *Relay) delivered(target string) { r.progress[target].Progressed() }

// drained reports the error of one of target's drains to its tracker and
// returns an error wrapping progress.ErrStalled once the loop has been
// stalled for the stall limit: the loop then ends its service. A stall
// ends with the next delivery (delivered); one that PostgreSQL's refusal
// caused ends as soon as a drain runs without error, since that drain read
// the outbox.
func (r *Relay) drained(target string, err error) error {
	t := r.progress[target]
	if pgRefused(err) {
		r.recordable[target].Store(false) // prove it again before the next produce
	}
	switch {
	case stalls(err):
		t.Stalled(err)
	case err == nil:
		if _, cause := t.StalledFor(); pgRefused(cause) {
			t.Progressed()
		}
	}
	return t.Exceeded(r.opt.StallLimit)
}

// listened reports one try of the notification listener to its tracker
// and returns an error wrapping progress.ErrStalled once the listener has
// been stalled for the stall limit: its service then ends, and the
// process with it (R-L8). A try that got as far as LISTEN progressed
// (err is then the later loss of its connection, an outage); one that
// PostgreSQL refused (pgRefused: the role may not log in or connect, the
// database is unknown) stalls, since no reconnection cures it; one that
// could not reach PostgreSQL is an outage, neither (R-L2), and leaves a
// stall as it was.
func (r *Relay) listened(listening bool, err error) error {
	t := r.listenProgress
	switch {
	case listening:
		t.Progressed()
	case pgRefused(err):
		t.Stalled(err)
	}
	return t.Exceeded(r.opt.StallLimit)
}

// standby clears target's stall when its term ends for another reason
// than the stall: a loop that does not run cannot stall.
func (r *Relay) standby(target string) { r.progress[target].Progressed() }
