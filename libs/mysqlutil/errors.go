package mysqlutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"io"
	"net"

	"github.com/go-sql-driver/mysql"
)

// refusedNumbers are the MySQL/MariaDB error numbers of a server that
// answers but refuses the client what it asks, the same for every row
// until an operator changes the grants, the credentials or the schema:
// access denied to the database, the user, a table, a column or a
// privilege (1044, 1045, 1142, 1143, 1227, 1698), and an unknown database,
// table or column (1049, 1146, 1054).
var refusedNumbers = map[uint16]bool{
	1044: true, 1045: true, 1142: true, 1143: true, 1227: true, 1698: true,
	1049: true, 1146: true, 1054: true,
}

// AccessRefused reports whether err is the mailbox server's refusal of
// access or of a missing table or column: waiting does not cure it, so a
// loop that meets it reports itself stalled (R-L8). A server that cannot
// be reached, or a row the server refuses for its values, is not such a
// refusal.
func AccessRefused(err error) bool {
	me, ok := errors.AsType[*mysql.MySQLError](err)
	return ok && refusedNumbers[me.Number]
}

// Unreachable reports whether err says that the mailbox server did not
// answer — refused, reset or closed connections, a dial or a call that ran
// out of time — rather than that it answered with an error (any
// MySQLError: credentials, grants, schema) or that the connection's
// settings are wrong (a TLS certificate the client rejects or a TLS
// handshake the server refuses). Only the first is an outage to wait out.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*mysql.MySQLError](err); ok {
		return false
	}
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		alert   tls.AlertError
		record  tls.RecordHeaderError
	)
	if errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &alert) || errors.As(err, &record) {
		return false
	}
	if errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	_, isNet := errors.AsType[net.Error](err)
	return isNet
}
