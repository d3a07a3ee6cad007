// Package httpserver runs an HTTP server as a lifecycle service, with the
// endpoints every msgexchange process serves: /healthz (the process is
// alive), /readyz (its dependencies answer) and /metrics.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"msgexchange/libs/lifecycle"
)

// ReadyFunc reports nil when the process can serve.
type ReadyFunc func(ctx context.Context) error

// Health registers /healthz and /readyz on mux.
func Health(mux *http.ServeMux, ready ReadyFunc) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
}

// New returns a service serving handler on addr. Timeouts bound slow
// clients; the listener is opened in Starting so that a busy port fails the
// start instead of the run.
func New(name, addr string, handler http.Handler, logger *slog.Logger) *lifecycle.Service {
	srv := &http.Server{
		Addr:              addr,
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	var ln net.Listener
	return lifecycle.NewService(name,
		func(context.Context) error {
			var err error
			ln, err = net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", addr, err)
			}
			logger.Info("http listening", "server", name, "addr", ln.Addr().String())
			return nil
		},
		func(ctx context.Context) error {
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return fmt.Errorf("serving http: %w", err)
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("shutting down http: %w", err)
			}
			return nil
		}, nil)
}
