package testutil

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Logger returns a text logger at level that writes each line to t.Log
// while the test runs, so that a failing test shows what the code under
// test logged. Lines logged after the test has ended (a client or a pool
// closing in a cleanup) are dropped instead of panicking in t.Log.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// tWriter forwards log lines to t.Log until stop.
type tWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
