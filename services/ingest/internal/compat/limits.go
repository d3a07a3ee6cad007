package compat

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what the entry's senders may cost (R-K9): requests per
// second and requests in flight, per source address and in total. A source
// beyond its own share gets 429 (it sends too much: slow down); any source
// when the entry as a whole is at its bound gets 503 (the entry is busy:
// retry later). Both carry Retry-After. A request holds its slot from
// before the token check to the answer, so that neither guessing tokens
// nor slow bodies escape the bounds. Zero disables a bound (tests of other
// behaviour); msgx's configuration requires every bound.
type Limits struct {
	// SourceRate and SourceBurst are the token bucket of each source
	// address: SourceRate requests per second on average, SourceBurst at
	// once.
	SourceRate  float64 `yaml:"source_rate"`
	SourceBurst int     `yaml:"source_burst"`
	// SourceConcurrent is the most requests of one source in flight.
	SourceConcurrent int `yaml:"source_concurrent"`
	// TotalRate and TotalBurst are the token bucket of the whole entry.
	TotalRate  float64 `yaml:"total_rate"`
	TotalBurst int     `yaml:"total_burst"`
	// TotalConcurrent is the most requests in flight in total; with
	// MaxBody it bounds the memory the entry's bodies take.
	TotalConcurrent int `yaml:"total_concurrent"`
}

// Reasons a request is limited, the values of the limit attribute of
// msgx_ingest_compat_limited_total.
const (
	limitSourceRate        = "source_rate"
	limitSourceConcurrency = "source_concurrency"
	limitTotalRate         = "total_rate"
	limitTotalConcurrency  = "total_concurrency"
)

// sourceIdle is how long a source's state is kept after its last request;
// sources are forgotten after it, so the table does not grow with every
// address ever seen.
const sourceIdle = 10 * time.Minute

// maxSources bounds the table of sources; a new source beyond it while
// every entry is in use is refused as total overload.
const maxSources = 10000

type source struct {
	bucket   *rate.Limiter
	inflight int
	last     time.Time
}

// limiter applies Limits. The time comes from the handler's clock, so
// tests drive the buckets with a fake clock.
type limiter struct {
	cfg Limits

	mu       sync.Mutex
	total    *rate.Limiter // nil: no total rate
	inflight int
	sources  map[string]*source
	swept    time.Time
}

func newLimiter(cfg Limits) *limiter {
	l := &limiter{cfg: cfg, sources: map[string]*source{}}
	if cfg.TotalRate > 0 {
		l.total = rate.NewLimiter(rate.Limit(cfg.TotalRate), max(cfg.TotalBurst, 1))
	}
	return l
}

// acquire takes a slot for a request of src at now; it returns release
// (call it when the message is stored or refused), or the refusal with
// the limit that refused it. A source's own limits are checked before the
// totals, so that a source beyond its share is told so (429) rather than
// that the entry is busy.
func (l *limiter) acquire(src string, now time.Time) (release func(), refusal *apiError, limit string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sources[src]
	if s == nil {
		l.sweep(now)
		if len(l.sources) >= maxSources {
			return nil, busy(time.Second), limitTotalConcurrency
		}
		s = &source{}
		if l.cfg.SourceRate > 0 {
			s.bucket = rate.NewLimiter(rate.Limit(l.cfg.SourceRate), max(l.cfg.SourceBurst, 1))
		}
		l.sources[src] = s
	}
	s.last = now
	if l.cfg.SourceConcurrent > 0 && s.inflight >= l.cfg.SourceConcurrent {
		return nil, tooMany("too many requests of this source in flight", time.Second), limitSourceConcurrency
	}
	if l.cfg.TotalConcurrent > 0 && l.inflight >= l.cfg.TotalConcurrent {
		return nil, busy(time.Second), limitTotalConcurrency
	}
	// The source's own bucket first, so that one source beyond its share
	// is told to slow down and does not drain the entry's bucket for the
	// others; a refused request gives back what it reserved.
	var own *rate.Reservation
	if s.bucket != nil {
		own = s.bucket.ReserveN(now, 1)
		if wait := own.DelayFrom(now); !own.OK() || wait > 0 {
			own.CancelAt(now)
			return nil, tooMany("this source sends more requests per second than the entry accepts", wait), limitSourceRate
		}
	}
	if l.total != nil {
		if r := l.total.ReserveN(now, 1); !r.OK() || r.DelayFrom(now) > 0 {
			wait := r.DelayFrom(now)
			r.CancelAt(now)
			if own != nil {
				own.CancelAt(now)
			}
			return nil, busy(wait), limitTotalRate
		}
	}
	s.inflight++
	l.inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			s.inflight--
			l.inflight--
			l.mu.Unlock()
		})
	}, nil, ""
}

// sweep forgets the sources idle for sourceIdle, at most once a minute.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute && len(l.sources) < maxSources {
		return
	}
	l.swept = now
	for k, s := range l.sources {
		if s.inflight == 0 && now.Sub(s.last) >= sourceIdle {
			delete(l.sources, k)
		}
	}
}

// tooMany is the 429 answer of a source beyond its own limit.
func tooMany(why string, wait time.Duration) *apiError {
	return &apiError{status: http.StatusTooManyRequests, code: "too_many_requests", message: why + "; retry later", retryAfter: wait}
}

// busy is the 503 answer when the entry as a whole is at its bound.
func busy(wait time.Duration) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: "overloaded", message: "the entry is at its bound of requests; retry later", retryAfter: wait}
}

// retryAfterSeconds renders a wait as Retry-After's whole seconds, at
// least 1.
func retryAfterSeconds(d time.Duration) string {
	d = min(d, time.Minute) // an infinite wait (a bucket of zero) still gets a number
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}
