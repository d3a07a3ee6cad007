package logging

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"msgexchange/libs/clock"
)

// Level is the process's log level, read by its logger at every record and
// changed while it runs (the admin port's /debug/loglevel, R-N2): an
// operator raises it to debug while a problem is happening, without the
// restart that would make the problem go away. A level set for a while
// (SetFor) reverts to the level set last without one when the while is
// over, so that a debug level forgotten on a production pod does not flood
// the logs for days. The revert is read from the clock at each record: no
// timer, no goroutine. Level implements slog.Leveler; it is safe for
// concurrent use.
type Level struct {
	clk  clock.Clock
	base slog.LevelVar
	temp atomic.Pointer[timedLevel]
}

// timedLevel is a level that holds until a time.
type timedLevel struct {
	level slog.Level
	until time.Time
}

// NewLevel returns a Level at l; clk tells when a level set with SetFor
// ends.
func NewLevel(l slog.Level, clk clock.Clock) *Level {
	v := &Level{clk: clk}
	v.base.Set(l)
	return v
}

// Level returns the level in force now; it implements slog.Leveler.
func (v *Level) Level() slog.Level {
	if t := v.temp.Load(); t != nil {
		if v.clk.Now().Before(t.until) {
			return t.level
		}
		v.temp.CompareAndSwap(t, nil)
	}
	return v.base.Level()
}

// Set sets the level until the next change, ending any level set with
// SetFor.
func (v *Level) Set(l slog.Level) {
	v.base.Set(l)
	v.temp.Store(nil)
}

// SetFor sets the level for d, after which the level set last with Set (or
// NewLevel) is in force again; it returns the time the level reverts.
func (v *Level) SetFor(l slog.Level, d time.Duration) time.Time {
	until := v.clk.Now().Add(d)
	v.temp.Store(&timedLevel{level: l, until: until})
	return until
}

// State returns the level in force now and, while a level set with SetFor
// holds, the time it ends and the level it reverts to; until is zero
// otherwise.
func (v *Level) State() (now slog.Level, until time.Time, then slog.Level) {
	if t := v.temp.Load(); t != nil && v.clk.Now().Before(t.until) {
		return t.level, t.until, v.base.Level()
	}
	return v.Level(), time.Time{}, v.Level()
}

// LevelName is the lower-case name of l as the configuration and the admin
// port write it: debug, info, warn, error (or e.g. info+2).
func LevelName(l slog.Level) string { return strings.ToLower(l.String()) }

// ParseLevel reads one of debug, info, warn or error (any case, spaces
// around ignored): the levels an operator sets at run time.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want debug, info, warn or error", strings.TrimSpace(s))
}
