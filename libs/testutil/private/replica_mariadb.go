package private

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A MariaDB failover is staged as a PostgreSQL one is (replica.go): every
// private MariaDB writes a binary log (row format), so that a replica can
// be made of it mid-stream; the replica applies the log asynchronously as
// the mailbox owners' replicas do, is cut off from it (Detach) so that the
// primary's last rows and markers never reach it, and is promoted when
// the primary crashes. Its AUTO_INCREMENT then continues after the last
// row it has: the IDs of the rows it lacks are handed out again.

// binlogName is the base name of a private MariaDB's binary log files.
const binlogName = "mariadb-bin"

// Replica starts a new private MariaDB and makes it an asynchronous
// replica of m, applying m's binary log from its first file: every
// database, table, account and row m has, and what follows. It returns
// when the replica runs; CaughtUp waits until it has applied what m has
// written. The replica is killed and removed when the test ends.
func (m *MariaDB) Replica(t testing.TB) *MariaDB {
	t.Helper()
	r := NewMariaDB(t)
	err := r.asRoot(startTimeout, func(ctx context.Context, db *sql.DB) error {
		return execAll(ctx, db, "making the private MariaDB a replica",
			fmt.Sprintf(`CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='',
				MASTER_LOG_FILE='%s.000001', MASTER_LOG_POS=4, MASTER_USE_GTID=no`, m.port, binlogName),
			`START SLAVE`)
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// CaughtUp waits until the replica has applied everything its primary
// had written to its binary log when it was called, so that what follows
// is what a replica cannot have.
func (m *MariaDB) CaughtUp(primary *MariaDB, timeout time.Duration) error {
	var status map[string]string
	err := primary.asRoot(10*time.Second, func(ctx context.Context, db *sql.DB) (err error) {
		status, err = showStatus(ctx, db, `SHOW MASTER STATUS`)
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the primary's binary log position: %w", err)
	}
	return m.asRoot(timeout+10*time.Second, func(ctx context.Context, db *sql.DB) error {
		return waitApplied(ctx, db, status["File"], status["Position"], timeout)
	})
}

// Detach cuts the replica off from its primary's binary log: its I/O
// thread stops, and once what it received is applied nothing more can
// arrive. It returns the primary's log position the replica has applied;
// from then on the primary's rows and markers are what a failover to this
// replica loses.
//
// The I/O thread can stop in the middle of a transaction's events: the
// SQL thread then never applies that transaction (it waits for the rest),
// so the replica has applied all it can once its SQL thread has read the
// whole relay log, not when it reaches the position the I/O thread read
// to. Waiting for that position timed out under load (a CI run: "the
// replica did not apply mariadb-bin.000001:198721 within 30s"). The
// incomplete transaction is what the failover loses, with the rest; the
// promotion drops it with the relay log.
func (m *MariaDB) Detach() (string, error) {
	var at string
	err := m.asRoot(time.Minute, func(ctx context.Context, db *sql.DB) error {
		if err := execAll(ctx, db, "detaching the replica", `STOP SLAVE IO_THREAD`); err != nil {
			return err
		}
		deadline := time.Now().Add(30 * time.Second)
		var before string // the applied position at the previous look
		for {
			status, err := showStatus(ctx, db, `SHOW SLAVE STATUS`)
			if err != nil {
				return fmt.Errorf("reading the replica's status: %w", err)
			}
			if status["Slave_SQL_Running"] != "Yes" {
				return fmt.Errorf("the replica's SQL thread is not running (last error %q)", status["Last_SQL_Error"])
			}
			applied := status["Relay_Master_Log_File"] + ":" + status["Exec_Master_Log_Pos"]
			read := status["Master_Log_File"] + ":" + status["Read_Master_Log_Pos"]
			// Idle at the end of the relay log, twice at one position: a
			// state read just before the thread took up newly received
			// events is not taken for its end.
			idle := strings.Contains(status["Slave_SQL_Running_State"], "read all relay log")
			if applied == read || (idle && applied == before) {
				at = applied
				return nil
			}
			before = applied
			if time.Now().After(deadline) {
				return fmt.Errorf("the replica applied %s of %s and did not finish its relay log within 30s (SQL thread: %q)",
					applied, read, status["Slave_SQL_Running_State"])
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond): // polled: MariaDB has no wait for "relay log read"
			}
		}
	})
	return at, err
}

// Promote makes the replica a primary: replication stops for good and
// its settings are forgotten (STOP SLAVE, RESET SLAVE ALL).
func (m *MariaDB) Promote() error {
	return m.asRoot(time.Minute, func(ctx context.Context, db *sql.DB) error {
		return execAll(ctx, db, "promoting the private MariaDB replica", `STOP SLAVE`, `RESET SLAVE ALL`)
	})
}

// asRoot runs fn on one root connection to the server, within timeout.
func (m *MariaDB) asRoot(timeout time.Duration, fn func(context.Context, *sql.DB) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(ctx, db)
}

// execAll runs the statements in order, what naming the step in errors.
func execAll(ctx context.Context, db *sql.DB, what string, statements ...string) error {
	for _, q := range statements {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %s: %w", what, q, err)
		}
	}
	return nil
}

// waitApplied waits until the replica's SQL thread applied the primary's
// log up to file:pos (MASTER_POS_WAIT).
func waitApplied(ctx context.Context, db *sql.DB, file, pos string, timeout time.Duration) error {
	var res sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT MASTER_POS_WAIT(?, ?, ?)`, file, pos, int(timeout.Seconds())).Scan(&res); err != nil {
		return fmt.Errorf("waiting for the replica to apply %s:%s: %w", file, pos, err)
	}
	switch {
	case !res.Valid:
		status, _ := showStatus(ctx, db, `SHOW SLAVE STATUS`)
		return fmt.Errorf("the replica's SQL thread is not running (last error %q)", status["Last_SQL_Error"])
	case res.Int64 < 0:
		return fmt.Errorf("the replica did not apply %s:%s within %s", file, pos, timeout)
	}
	return nil
}

// showStatus reads the only row of a SHOW … STATUS statement by column
// name.
func showStatus(ctx context.Context, db *sql.DB, statement string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, statement)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: no row", statement)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out, rows.Err()
}
