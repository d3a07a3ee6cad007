package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"msgexchange/libs/lifecycle"
	"msgexchange/services/ingest/internal/compat"
)

// CompatServiceName is the lifecycle name of the compat entry's server.
const CompatServiceName = "ingest-compat"

// compatShutdown bounds how long a stop waits for compat requests in
// flight (an insert that has begun is finished, see compat.Handler).
const compatShutdown = 10 * time.Second

// compatServer serves only POST /cminmsgs/send on compat.addr (R-H10): a
// listener of its own, so that the entry gets its own Service, network
// policy and source networks, and nothing else of the process — flight
// list, board, metrics — is reachable through it.
type compatServer struct {
	srv    *http.Server
	logger *slog.Logger
	ln     net.Listener
	addr   atomic.Value // string: the bound address once listening
}

func newCompatServer(addr string, h *compat.Handler, logger *slog.Logger) *compatServer {
	mux := http.NewServeMux()
	mux.Handle(compat.Path, h)
	c := &compatServer{
		srv: &http.Server{
			Addr:              addr,
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
		},
		logger: logger,
	}
	c.addr.Store("")
	return c
}

func (c *compatServer) service() *lifecycle.Service {
	return lifecycle.NewService(CompatServiceName, c.starting, c.running, nil)
}

// starting opens the listener, so that a busy port fails the start.
func (c *compatServer) starting(context.Context) error {
	ln, err := net.Listen("tcp", c.srv.Addr)
	if err != nil {
		return fmt.Errorf("listening on compat.addr %s: %w", c.srv.Addr, err)
	}
	c.ln = ln
	c.addr.Store(ln.Addr().String())
	c.logger.Info("compat entry listening", "addr", ln.Addr().String(), "path", compat.Path)
	return nil
}

func (c *compatServer) running(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- c.srv.Serve(c.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving the compat entry: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), compatShutdown)
	defer cancel()
	if err := c.srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down the compat entry: %w", err)
	}
	return nil
}
