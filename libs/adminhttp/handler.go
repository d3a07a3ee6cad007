package adminhttp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"msgexchange/libs/logging"
)

// maxLevelBody bounds the body of PUT /debug/loglevel: a level name.
const maxLevelBody = 64

// Handler returns the admin port's routes:
//
//   - /debug/pprof/ and below: net/http/pprof's index, cmdline, profile
//     (CPU, ?seconds=N), symbol, trace and the named profiles (heap,
//     goroutine, allocs, block, mutex, threadcreate);
//   - GET /debug/loglevel: the level in force (and, for a level set for a
//     while, when it ends and what follows);
//   - PUT /debug/loglevel with a body of debug, info, warn or error: sets
//     the level, for good or, with ?for=<duration> (e.g. 10m), for that
//     long. A body or duration it cannot read is answered 400 with what
//     it wants.
//
// The routes are registered on a mux of their own: importing
// net/http/pprof also registers them on http.DefaultServeMux, which no
// msgexchange listener serves.
func Handler(level *logging.Level, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	lh := levelHandler{level: level, logger: logger}
	mux.HandleFunc("GET /debug/loglevel", lh.get)
	mux.HandleFunc("PUT /debug/loglevel", lh.put)
	return mux
}

type levelHandler struct {
	level  *logging.Level
	logger *slog.Logger
}

func (h levelHandler) get(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, describe(h.level)+"\n")
}

// describe is the level in force as GET /debug/loglevel answers it:
// "info", or "debug until 2026-01-01T10:10:00Z, then info".
func describe(level *logging.Level) string {
	now, until, then := level.State()
	if until.IsZero() {
		return logging.LevelName(now)
	}
	return fmt.Sprintf("%s until %s, then %s", logging.LevelName(now), until.UTC().Format(time.RFC3339), logging.LevelName(then))
}

func (h levelHandler) put(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLevelBody))
	if err != nil {
		http.Error(w, fmt.Sprintf("reading the level: %v; send one of debug, info, warn or error", err), http.StatusBadRequest)
		return
	}
	l, err := logging.ParseLevel(string(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var d time.Duration
	if s := r.URL.Query().Get("for"); s != "" {
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			http.Error(w, fmt.Sprintf("for %q: want a positive duration, e.g. 10m or 1h", s), http.StatusBadRequest)
			return
		}
	}
	from := describe(h.level)
	attrs := []slog.Attr{slog.String("from", from), slog.String("to", logging.LevelName(l))}
	if d > 0 {
		until := h.level.SetFor(l, d)
		_, _, then := h.level.State()
		attrs = append(attrs, slog.Duration("for", d), slog.Time("until", until), slog.String("then", logging.LevelName(then)))
	} else {
		h.level.Set(l)
	}
	h.logChange(r.Context(), attrs)
	h.get(w, r)
}

// logChange writes the change at INFO whatever the new level: straight to
// the handler, past the level check, so that setting warn or error does
// not hide the line that says info was silenced.
func (h levelHandler) logChange(ctx context.Context, attrs []slog.Attr) {
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "log level changed", 0)
	rec.AddAttrs(attrs...)
	_ = h.logger.Handler().Handle(ctx, rec)
}
