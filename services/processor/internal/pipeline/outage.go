package pipeline

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

// isOutage reports whether err means PostgreSQL could not be reached or
// dropped the connection — an infrastructure outage, not a property of the
// message being executed. Errors PostgreSQL returned about the statement
// itself (*pgconn.PgError) are not outages, except the server shutting
// down or refusing connections.
func isOutage(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "57": // connection exception; operator intervention (admin shutdown, crash shutdown, cannot connect now)
			return pgErr.Code != "57014" // query_canceled is a timeout of ours, not an outage
		}
		// read_only_sql_transaction: the server takes no writes — a standby
		// a session reached during a failover, or writes frozen by an
		// operator — which says nothing about the message (pgxutil refuses
		// a standby at connect; this is the session that was already open).
		return pgErr.Code == "25006"
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED):
		return true
	case errors.Is(err, puddle.ErrClosedPool):
		return true
	}
	return pgconn.SafeToRetry(err)
}
