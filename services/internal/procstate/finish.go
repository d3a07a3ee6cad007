package procstate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/services/internal/outbox"
)

// Bind is an identity binding (R-B4): the message holds the key while it
// is open and after it applied something; a terminal state without an
// effect gives the key up (Finish).
type Bind struct {
	MsgID int64
	Key   string
}

// WriteBinds writes binds in db.
func WriteBinds(ctx context.Context, db DB, binds ...Bind) error {
	ids, keys := make([]int64, len(binds)), make([]string, len(binds))
	for i, x := range binds {
		ids[i], keys[i] = x.MsgID, x.Key
	}
	if _, err := db.Exec(ctx, `UPDATE proc_state p SET identity_key = v.key
		FROM unnest($1::bigint[], $2::text[]) AS v(id, key) WHERE p.msg_id = v.id`, ids, keys); err != nil {
		return fmt.Errorf("binding identity: %w", err)
	}
	return nil
}

// Apply is APPLIED (INV-23): the message's business change is committed,
// its Redis writes are outstanding, and it has no mailbox intent yet.
type Apply struct {
	MsgID int64
	// Note is the handler's note (reason), "" for none.
	Note string
	At   time.Time
	Meta Meta
	// Identity is bound with the state ("" keeps the row's binding).
	Identity string
}

// AppliedAt is a message Apply moved, with its registration time.
type AppliedAt struct {
	MsgID      int64
	Registered time.Time
}

// openRow and unfinishedRow are the state tests of the transitions: the
// row is open (PENDING, FAILED), or not yet finished (APPLIED too).
//
// Every transition finds its rows only through the join with the unnest
// of its values, each a probe of the primary key, and tests the state
// through CASE, so that no plan can start from proc_state: a generic plan
// made on statistics from a quiet table (almost no open rows) estimates
// the open messages at one. With a plain "state IN" it read every open
// message through the partial index proc_state_open_idx and probed the
// batch for each (over a backlog of 12,000, 10 s per batch); with "msg_id
// = ANY" of the batch added it read the batch's rows through that index
// but, taking them for one row, put them outside a nested loop and
// scanned the whole unnest again for each: 1,024 × 1,024 rows and 2.5–4.7 s
// a batch with a year of history (EXPLAIN on the R-M5 bench's database).
// The CASE hides the state from the index and from the estimate; the
// unnest drives and proc_state is probed once per message
// (TestTransitions_R_M5_R_J2_PlansReadOnlyTheBatchsRows).
const (
	openRow       = `CASE WHEN p.state IN ('PENDING', 'FAILED') THEN true ELSE false END`
	unfinishedRow = `CASE WHEN p.state IN ('PENDING', 'FAILED', 'APPLIED') THEN true ELSE false END`
)

// applySQL moves open messages with a pending projection to APPLIED.
const applySQL = `
		UPDATE proc_state p SET state='APPLIED', error_class=NULL, reason=NULLIF(v.note, ''), applied_at=v.at, updated_at=v.at,
			next_attempt_at=NULL, executing_by=NULL, executing_through=NULL,
			processing_started_at=COALESCE(p.processing_started_at, v.at), identity_key=COALESCE(v.ik, p.identity_key),
			sndr=v.sndr, msg_type=v.typ, msg_styp=v.styp, seqn=v.seqn, dttm=v.dttm
		FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
			AS v(id, note, at, sndr, typ, styp, seqn, dttm, ik)
		WHERE p.msg_id = v.id AND ` + openRow + `
		  AND EXISTS (SELECT 1 FROM projection_pending pp WHERE pp.msg_id = v.id)
		RETURNING p.msg_id, p.registered_at`

// QueueApply queues rows on b. A message is APPLIED only if it is open
// and has a pending projection, checked by the statement: its caller
// holds the message's row lock, taken by an earlier statement, so an ack
// transaction that removed the last pending projection committed before
// and the check sees it (R-H4). done receives the messages moved; one
// left out is open with nothing pending (its caller finishes it
// SUCCEEDED) or no longer open.
func QueueApply(b *pgx.Batch, rows []Apply, done func([]AppliedAt) error) {
	b.Queue(applySQL, applyArgs(rows)...).Query(func(r pgx.Rows) error {
		moved, err := pgx.CollectRows(r, pgx.RowToStructByPos[AppliedAt])
		if err != nil {
			return fmt.Errorf("marking applied: %w", err)
		}
		return done(moved)
	})
}

// applyAllSQL is applySQL that fails (msgx_check) unless every message
// of $1 moved, returning their IDs and registration times as arrays.
var applyAllSQL = `WITH m AS (` + applySQL + `)
	SELECT msgx_check(count(*) = cardinality($1::bigint[]), 'marking applied: a message of the batch is no longer open or has nothing pending'),
		COALESCE(array_agg(msg_id), '{}'), COALESCE(array_agg(registered_at), '{}') FROM m`

// QueueApplyAll is QueueApply whose statement fails (Checked) unless
// every message of rows moved to APPLIED — a batch whose messages wrote
// their pending projections in the same transaction, under their row
// locks — so the batch may travel with its COMMIT; done only collects.
func QueueApplyAll(b *pgx.Batch, rows []Apply, done func([]AppliedAt)) {
	b.Queue(applyAllSQL, applyArgs(rows)...).QueryRow(func(r pgx.Row) error {
		var ok bool
		var ids []int64
		var at []time.Time
		if err := r.Scan(&ok, &ids, &at); err != nil {
			return fmt.Errorf("marking applied: %w", err)
		}
		moved := make([]AppliedAt, len(ids))
		for i := range ids {
			moved[i] = AppliedAt{MsgID: ids[i], Registered: at[i]}
		}
		done(moved)
		return nil
	})
}

// applyArgs are the arrays of applySQL's parameters.
func applyArgs(rows []Apply) []any {
	n := len(rows)
	ids, notes, ats := make([]int64, n), make([]string, n), make([]time.Time, n)
	sndr, typ, styp, seqn, dttm, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	for i, r := range rows {
		ids[i], notes[i], ats[i], keys[i] = r.MsgID, clip.Text(r.Note), r.At, nullable(r.Identity)
		sndr[i], typ[i], styp[i], seqn[i], dttm[i] = r.Meta.SNDR, r.Meta.TYPE, r.Meta.STYP, r.Meta.SEQN, r.Meta.DTTM
	}
	return []any{ids, notes, ats, sndr, typ, styp, seqn, dttm, keys}
}

// Fail is FAILED with a retry (R-B3): the attempt is counted and the
// message waits at the head until Next.
type Fail struct {
	MsgID         int64
	Class, Reason string
	Attempts      int
	Next, At      time.Time
}

// failSQL records a failed attempt of open messages.
const failSQL = `
		UPDATE proc_state p SET state='FAILED', error_class=v.cls, reason=v.reason, attempts=v.attempts, next_attempt_at=v.next, updated_at=v.at,
			processing_started_at=COALESCE(p.processing_started_at, v.at)
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::timestamptz[]) AS v(id, cls, reason, attempts, next, at)
		WHERE p.msg_id = v.id AND ` + openRow

// WriteFails writes rows in db and reports how many messages were still
// open and are now FAILED.
func WriteFails(ctx context.Context, db DB, rows ...Fail) (int, error) {
	n := len(rows)
	ids, classes, reasons, attempts, next, ats := make([]int64, n), make([]string, n), make([]string, n), make([]int32, n), make([]time.Time, n), make([]time.Time, n)
	for i, r := range rows {
		ids[i], classes[i], reasons[i], attempts[i], next[i], ats[i] = r.MsgID, r.Class, clip.Text(r.Reason), int32(r.Attempts), r.Next, r.At
	}
	tag, err := db.Exec(ctx, failSQL, ids, classes, reasons, attempts, next, ats)
	if err != nil {
		return 0, fmt.Errorf("recording failure: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// Finish is a terminal state written by the processor (SUCCEEDED,
// SKIPPED, DEAD) from an open one, PENDING, FAILED or APPLIED.
type Finish struct {
	MsgID int64
	State string
	// Class is the error class, "" for none.
	Class string
	// Reason is clipped (R-H2): it often quotes the message.
	Reason string
	At     time.Time
	Meta   Meta
	// Identity is bound with the state ("" keeps the row's binding). A
	// message that ends DEAD or SKIPPED applied nothing, so it gives up
	// its identity (R-K3): a forged or rejected message never suppresses
	// the genuine one that comes later.
	Identity string
	// Attempts, when not 0, is the message's count of attempts.
	Attempts int
}

// OutboxRow is an outbox row a batch writes with its terminal states, in
// decision order; a row of target mailbox only places the intent of its
// message (outbox.InsertInOrder).
type OutboxRow = outbox.Row

// finishSQL writes Finish rows ($1–$12) and, in the same statement, the
// mailbox intent of every message it finished, in its place among the
// outbox rows $13–$18 (INV-8). It returns how many messages it finished.
var finishSQL = `
	WITH u AS (
		UPDATE proc_state p SET state=v.state, error_class=v.cls, reason=v.reason, finished_at=v.at, updated_at=v.at,
			next_attempt_at=NULL, executing_by=NULL, executing_through=NULL,
			processing_started_at=COALESCE(p.processing_started_at, v.at), attempts=COALESCE(v.attempts, p.attempts),
			identity_key=CASE WHEN v.state IN ('DEAD', 'SKIPPED') THEN NULL ELSE COALESCE(v.ik, p.identity_key) END,
			sndr=COALESCE(NULLIF(v.sndr, ''), p.sndr), msg_type=COALESCE(NULLIF(v.typ, ''), p.msg_type),
			msg_styp=COALESCE(NULLIF(v.styp, ''), p.msg_styp), seqn=COALESCE(NULLIF(v.seqn, ''), p.seqn),
			dttm=COALESCE(NULLIF(v.dttm, ''), p.dttm)
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[], $8::text[], $9::text[],
			$10::text[], $11::text[], $12::int[])
			AS v(id, state, cls, reason, at, sndr, typ, styp, seqn, dttm, ik, attempts)
		WHERE p.msg_id = v.id AND ` + unfinishedRow + `
		RETURNING p.msg_id, p.finished_at),
	` + outbox.InsertInOrder("u", 13) + `
	SELECT count(*) FROM u`

// finishAllSQL is finishSQL that fails (msgx_check) unless every message
// of $1 was still open and is now terminal.
var finishAllSQL = strings.TrimSuffix(finishSQL, "SELECT count(*) FROM u") +
	`SELECT msgx_check(count(*) = cardinality($1::bigint[]), 'writing terminal states: a message of the batch is no longer open') FROM u`

// QueueFinish queues rows and the outbox rows of their batch (nil for
// none) on b as one statement; done receives how many messages were still
// open and are now terminal. The caller rolls back if that is not all of
// them, or the intents of the others would be missing — or uses
// QueueFinishAll, whose statement checks it.
func QueueFinish(b *pgx.Batch, rows []Finish, ordered []OutboxRow, done func(finished int) error) {
	b.Queue(finishSQL, finishArgs(rows, ordered)...).QueryRow(func(r pgx.Row) error {
		var finished int
		if err := r.Scan(&finished); err != nil {
			return fmt.Errorf("writing terminal states: %w", err)
		}
		return done(finished)
	})
}

// QueueFinishAll is QueueFinish whose statement fails (Checked) unless
// every message of rows was still open and is now terminal: nothing for
// the caller to check before COMMIT, so the batch may travel with it.
func QueueFinishAll(b *pgx.Batch, rows []Finish, ordered []OutboxRow) {
	b.Queue(finishAllSQL, finishArgs(rows, ordered)...)
}

// finishArgs are the arrays of finishSQL's parameters.
func finishArgs(rows []Finish, ordered []OutboxRow) []any {
	n := len(rows)
	ids, states, classes, reasons, ats := make([]int64, n), make([]string, n), make([]*string, n), make([]string, n), make([]time.Time, n)
	sndr, typ, styp, seqn, dttm, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	attempts := make([]*int32, n)
	for i, r := range rows {
		ids[i], states[i], classes[i], reasons[i], ats[i], keys[i] = r.MsgID, r.State, nullable(r.Class), clip.Text(r.Reason), r.At, nullable(r.Identity)
		sndr[i], typ[i], styp[i], seqn[i], dttm[i] = r.Meta.SNDR, r.Meta.TYPE, r.Meta.STYP, r.Meta.SEQN, r.Meta.DTTM
		if r.Attempts != 0 {
			a := int32(r.Attempts)
			attempts[i] = &a
		}
	}
	m := len(ordered)
	targets, pkeys, payloads, headers, msgIDs, oats := make([]string, m), make([]string, m), make([][]byte, m), make([]*string, m), make([]int64, m), make([]time.Time, m)
	for i, o := range ordered {
		targets[i], pkeys[i], payloads[i], msgIDs[i], oats[i] = o.Target, o.Pkey, o.Payload, o.MsgID, o.At
		if o.Headers != nil {
			h := string(o.Headers)
			headers[i] = &h
		}
	}
	return []any{ids, states, classes, reasons, ats, sndr, typ, styp, seqn, dttm, keys, attempts,
		targets, pkeys, payloads, headers, msgIDs, oats}
}

// WriteFinish writes rows in db at once and reports how many messages
// were still open and are now terminal.
func WriteFinish(ctx context.Context, db DB, rows ...Finish) (int, error) {
	var finished int
	b := &pgx.Batch{}
	QueueFinish(b, rows, nil, func(n int) error { finished = n; return nil })
	if err := send(ctx, db, b); err != nil {
		return 0, err
	}
	return finished, nil
}

// QueueNote queues the progress note of a message that stays open (a
// daily snapshot between its batches, R-C6): its reason.
func QueueNote(b *pgx.Batch, msgID int64, note string, at time.Time) {
	b.Queue(`UPDATE proc_state SET reason=$2, updated_at=$3 WHERE msg_id=$1`, msgID, note, at)
}
