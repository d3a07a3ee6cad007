package adminhttp

import (
	"log/slog"

	"msgexchange/libs/httpserver"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/logging"
)

// ServiceName is the admin server's lifecycle service name.
const ServiceName = "admin"

// New returns the admin server on c.Addr as a lifecycle service (the
// process's one HTTP server pattern, httpserver.New), or nil when c.Addr
// is empty: off, no listener. Its timeouts are httpserver's; pprof extends
// the write deadline of a CPU profile or trace by the seconds it asks for.
func New(c Config, level *logging.Level, logger *slog.Logger) *lifecycle.Service {
	if !c.Enabled() {
		return nil
	}
	logger = logger.With("component", ServiceName)
	return httpserver.New(ServiceName, c.Addr, Handler(level, logger), logger)
}
