// Package procstate writes every change of proc_state, the life of a
// mailbox message in the processor's database: registering it from its
// inbox record, or DEAD(MALFORMED) when the record is not text
// (register.go), claiming it for execution
// and handing the claim on (claim.go), binding its identity, APPLIED,
// FAILED with a retry, a terminal state with its mailbox intent and a
// snapshot's progress note (finish.go), SUCCEEDED once its projections
// are acknowledged or repaired by the self-check, and an end by an
// operator (settle.go), the record of its mailbox marker and the
// reopening of a backfill (backfill.go)
// and its replay (replay.go).
//
// Each kind of change is a value written by one function as one
// statement over arrays (unnest), so a batch of messages and a single
// message, which is a batch of one, share the same SQL: the guards that
// keep terminal states final (INV-6: every transition names the states it
// may leave), the execution fences and the timestamps are written once.
// The processor, the dispatcher and the control plane use this package,
// since services never import each other; no other code inserts or
// updates proc_state.
//
// The functions named Queue… add their statement to a pgx.Batch with a
// callback that reads its result when the batch is read, so a caller
// sends them in the same round trip as its other writes; the others run
// at once on a transaction or pool. Those whose condition the caller's
// commit depends on check it in the statement (msgx_check, Checked) and
// only collect in their callback, so the batch may travel with its
// COMMIT (lease.SendAtCommit).
package procstate

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what a transaction and a pool offer.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// CheckSQLState is the SQLSTATE msgx_check raises when a statement's
// condition does not hold ("MX002", migrations/postgres/00035_check.sql).
const CheckSQLState = "MX002"

// Checked reports whether err is a statement's msgx_check that failed:
// a condition of the transaction (every message of a batch still open, a
// claim taken) did not hold, and nothing of the transaction committed.
func Checked(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == CheckSQLState
}

// send sends b on db and reads every result, running the callbacks the
// Queue functions registered.
func send(ctx context.Context, db DB, b *pgx.Batch) error {
	return db.SendBatch(ctx, b).Close()
}

// States of proc_state.
const (
	Pending   = "PENDING"
	Applied   = "APPLIED"
	Succeeded = "SUCCEEDED"
	Skipped   = "SKIPPED"
	Failed    = "FAILED"
	Dead      = "DEAD"
)

// Meta are the message's META values written with its outcome; an empty
// value keeps what the row has.
type Meta struct {
	SNDR, TYPE, STYP, SEQN, DTTM string
}

// nullable returns nil for "", else a pointer to s.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
