package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"msgexchange/libs/clock"
)

// RateLimited returns a handler that passes at most burst records of one
// cause — the same level and message — per interval to h, and drops the
// rest. The next record of that cause that passes carries how many were
// dropped before it (attribute "suppressed"), so nothing is hidden, only
// counted. Client libraries log one line per failed request, and during an
// outage they fail in a tight loop (franz-go's produce load errors reached
// 50,000 lines a second): wrapped by this, a client writes at most a few
// lines a second per cause, whatever the outage. Handlers derived with
// WithAttrs or WithGroup share the limits of the handler they came from.
func RateLimited(h slog.Handler, burst int, interval time.Duration, clk clock.Clock) slog.Handler {
	return rateLimited{h: h, l: &limiter{burst: max(burst, 1), interval: interval, clk: clk, causes: map[string]*window{}}}
}

// maxCauses bounds the causes a limiter remembers; beyond it, causes whose
// window is over are forgotten.
const maxCauses = 1024

type limiter struct {
	mu       sync.Mutex
	burst    int
	interval time.Duration
	clk      clock.Clock
	causes   map[string]*window
}

type window struct {
	start   time.Time
	passed  int
	dropped int
}

// allow reports whether a record of cause may pass now and, if so, how many
// records of the cause were dropped since the last one that passed.
func (l *limiter) allow(cause string) (int, bool) {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.causes[cause]
	if !ok {
		if len(l.causes) >= maxCauses {
			for c, o := range l.causes {
				if now.Sub(o.start) >= l.interval && o.dropped == 0 {
					delete(l.causes, c)
				}
			}
		}
		w = &window{start: now}
		l.causes[cause] = w
	}
	if now.Sub(w.start) >= l.interval {
		w.start, w.passed = now, 0
	}
	if w.passed >= l.burst {
		w.dropped++
		return 0, false
	}
	w.passed++
	dropped := w.dropped
	w.dropped = 0
	return dropped, true
}

type rateLimited struct {
	h slog.Handler
	l *limiter
}

func (r rateLimited) Enabled(ctx context.Context, level slog.Level) bool {
	return r.h.Enabled(ctx, level)
}

func (r rateLimited) Handle(ctx context.Context, rec slog.Record) error {
	dropped, ok := r.l.allow(rec.Level.String() + " " + rec.Message)
	if !ok {
		return nil
	}
	if dropped > 0 {
		rec = rec.Clone()
		rec.AddAttrs(slog.Int("suppressed", dropped))
	}
	return r.h.Handle(ctx, rec)
}

func (r rateLimited) WithAttrs(attrs []slog.Attr) slog.Handler {
	return rateLimited{h: r.h.WithAttrs(attrs), l: r.l}
}

func (r rateLimited) WithGroup(name string) slog.Handler {
	return rateLimited{h: r.h.WithGroup(name), l: r.l}
}
