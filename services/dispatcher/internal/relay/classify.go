package relay

import (
	"errors"

	"github.com/go-sql-driver/mysql"

	"msgexchange/libs/kafka"
	"msgexchange/libs/mysqlutil"
)

// class is what a failed delivery says about the next try (R-L2). It is
// read from the error itself — franz-go's Kafka error codes and client
// errors, the MySQL driver's error numbers — never from how often a row
// failed, so an outage of any length is never mistaken for poison.
type class int

const (
	// transient: the dependency is down, slow or refusing for a while (no
	// answer, a dial or timeout error, a retriable Kafka code, a lost MySQL
	// connection). The row is retried with capped backoff for as long as it
	// lasts and the try is not counted against its attempts.
	transient class = iota
	// permanent: the try cannot succeed however often it is repeated (a
	// record too large, authorization refused, an invalid record). The row
	// is dead-lettered at once with its cause.
	permanent
	// refused: the dependency answered with an error neither known to pass
	// nor known to be final. The try counts against the row's attempts, and
	// the row is dead-lettered when they run out (delivery.max-attempts,
	// pipeline.backfill-max-attempts).
	refused
	// stalled: the mailbox or the broker refuses the loop rather than the
	// row — access denied, an unknown database, table or column
	// (mysqlutil.AccessRefused); an authorization or another final Kafka
	// code that refuses the client, not the record (kafka.StallsLoop) —
	// alike for every row until an operator restores the grant, the ACL or
	// the table. The row is not at fault, so it waits like an outage's (the
	// target's outage schedule, the try not counted: R-L2) instead of
	// burning its attempts towards a dead letter, while the loop reports
	// itself stalled: not ready at once, and past the stall limit the
	// process ends for its supervisor to restart it (R-L8).
	stalled
)

// waits reports whether a row that failed with class c waits without its
// try counted, on the target's outage schedule: the failure was the
// dependency's, not the row's (R-L2).
func (c class) waits() bool { return c == transient || c == stalled }

func (c class) String() string {
	switch c {
	case transient:
		return "transient"
	case permanent:
		return "permanent"
	case stalled:
		return "stalled"
	default:
		return "refused"
	}
}

// classifyKafka classifies a failed produce or transaction by
// kafka.Classify: a final code that refuses the record (too large,
// invalid) is permanent, one that refuses the client (an authorization, an
// unsupported setting: kafka.StallsLoop) is stalled — dead-lettering every
// row for a revoked ACL would leave them all for an operator to requeue —,
// any other code the broker marks not retriable is refused, and
// everything else — retriable codes,
// record timeouts, dial and network errors, a context deadline (a broker
// that never answered) — is transient. A fenced producer is transient
// here: the term that fenced it decides what happens (R-H6).
func classifyKafka(err error) class {
	if err == nil || fenced(err) {
		return transient
	}
	switch kafka.Classify(err) {
	case kafka.Final:
		if kafka.StallsLoop(err) {
			return stalled
		}
		return permanent
	case kafka.Refused:
		return refused
	}
	return transient
}

// transientMySQL are the MySQL/MariaDB error numbers of a server that is
// down, restarting, overloaded or failing over: too many connections (1040),
// bad handshake or host errors (1042, 1043, 1129, 1130), unknown command at
// shutdown (1047), shutdown in progress (1053), connection aborted or killed
// (1152, 1153, 1159, 1160, 1161, 1927, 4031), lock wait and deadlock (1205,
// 1213), read-only during a failover (1290, 1792, 1836), query interrupted
// (1317, 3024) and the client-side server-gone codes (2002, 2003, 2006,
// 2013).
var transientMySQL = map[uint16]bool{
	1040: true, 1042: true, 1043: true, 1047: true, 1053: true, 1129: true, 1130: true,
	1152: true, 1153: true, 1159: true, 1160: true, 1161: true, 1205: true, 1213: true,
	1290: true, 1317: true, 1792: true, 1836: true, 1927: true, 3024: true, 4031: true,
	2002: true, 2003: true, 2006: true, 2013: true,
}

// erSignalException is MySQL's number of an error a trigger raised with
// SIGNAL: the mailbox's row rules (deploy/grants/mysql.sql, R-K7) refusing
// a write, which no retry changes.
const erSignalException = 1644

// classifyMySQL classifies a failed mailbox statement (a marker or a
// COUTMSGS insert). The server's own error numbers decide: those of an
// unavailable server are transient; those that refuse the account or
// miss a table or column (mysqlutil.AccessRefused) are stalled — they
// refuse every row alike, so no row's attempts are spent on them; any
// other (a value the column refuses) is refused — an operator must act,
// and the row's attempts bound the tries. An error without a number (a
// dropped or refused connection, a timeout, the driver's bad connection)
// means the server did not answer: transient. A write refused by a guard
// of the dispatcher's own (ErrMailboxGuard) or by the mailbox's row rules
// (erSignalException) is permanent: it is dead-lettered at once with its
// cause. A missing mailbox row is no error at all but an outcome
// (OutcomeRowMissing, OutcomeRowReplaced), abandoned at once.
func classifyMySQL(err error) class {
	if errors.Is(err, ErrMailboxGuard) {
		return permanent
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		if transientMySQL[me.Number] {
			return transient
		}
		if mysqlutil.AccessRefused(err) {
			return stalled
		}
		if me.Number == erSignalException {
			return permanent
		}
		return refused
	}
	return transient
}
