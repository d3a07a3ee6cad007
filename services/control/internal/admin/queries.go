package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/nullable"
)

// messageColumns are the proc_state columns of a Message, in the order
// scanMessage reads them; the raw XML is last and selected only when asked
// for, so that a status query never moves up to 10 MB.
const messageColumns = `msg_id, state, error_class, reason, attempts, next_attempt_at,
       processing_started_at, identity_key, sndr, msg_type, msg_styp, seqn,
       dttm, received_at, registered_at, applied_at, finished_at,
       backfilled_at, updated_at, kafka_offset, backfill_outcome`

// scanner is a row that can be read: pgx.Row or pgx.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// rowQuerier is the part of a pool or transaction a single-row read uses.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queryMessage reads one proc_state row; pgx.ErrNoRows when absent.
func queryMessage(ctx context.Context, db rowQuerier, msgID int64, includeRaw bool) (*controlv1.Message, error) {
	q := `SELECT ` + messageColumns + `, CASE WHEN $2::boolean THEN raw END FROM proc_state WHERE msg_id = $1`
	return scanMessage(db.QueryRow(ctx, q, msgID, includeRaw), true)
}

// scanMessage reads the messageColumns of one row, and the raw XML after
// them when withRaw is set.
func scanMessage(row scanner, withRaw bool) (*controlv1.Message, error) {
	var (
		m                                                  controlv1.Message
		state                                              string
		errorClass, reason, identity, sndr, typ, styp, raw *string
		seqn, dttm, backfillOutcome                        *string
		nextAttempt, started, received                     *time.Time
		registered, updated                                time.Time
		applied, finished, backfilled                      *time.Time
	)
	dest := []any{
		&m.MsgId, &state, &errorClass, &reason, &m.Attempts, &nextAttempt,
		&started, &identity, &sndr, &typ, &styp, &seqn,
		&dttm, &received, &registered, &applied, &finished,
		&backfilled, &updated, &m.KafkaOffset, &backfillOutcome,
	}
	if withRaw {
		dest = append(dest, &raw)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	var err error
	if m.State, err = messageStateFromDB(state); err != nil {
		return nil, err
	}
	if m.ErrorClass, err = errorClassFromDB(errorClass); err != nil {
		return nil, err
	}
	m.Reason = nullable.String(reason)
	m.NextAttemptAt = nullable.Timestamp(nextAttempt)
	m.ProcessingStartedAt = nullable.Timestamp(started)
	m.IdentityKey = nullable.String(identity)
	m.Sndr = nullable.String(sndr)
	m.Type = nullable.String(typ)
	m.Styp = nullable.String(styp)
	m.Seqn = nullable.String(seqn)
	m.Dttm = nullable.String(dttm)
	m.ReceivedAt = nullable.Timestamp(received)
	m.RegisteredAt = timestamppb.New(registered)
	m.AppliedAt = nullable.Timestamp(applied)
	m.FinishedAt = nullable.Timestamp(finished)
	m.BackfilledAt = nullable.Timestamp(backfilled)
	m.BackfillOutcome = nullable.String(backfillOutcome)
	m.UpdatedAt = timestamppb.New(updated)
	m.Raw = nullable.String(raw)
	return &m, nil
}

// backlog is the raw material of a GetBacklogResponse.
type backlog struct {
	counts           *controlv1.StateCounts
	unmarkedTerminal int64
	oldestID         int64 // 0 when nothing is unfinished
	oldestSince      time.Time
}

// queryBacklog reads the counts and the oldest unfinished message from one
// snapshot, so the figures agree with each other. The counts scan
// proc_state once; the table holds only record-retention days of messages
// (R-B10). The oldest unfinished message is found through the partial
// indexes on the unfinished states.
func queryBacklog(ctx context.Context, db *pgxpool.Pool) (backlog, error) {
	const counts = `
SELECT count(*) FILTER (WHERE state = 'PENDING'),
       count(*) FILTER (WHERE state = 'APPLIED'),
       count(*) FILTER (WHERE state = 'SUCCEEDED'),
       count(*) FILTER (WHERE state = 'SKIPPED'),
       count(*) FILTER (WHERE state = 'FAILED'),
       count(*) FILTER (WHERE state = 'DEAD'),
       count(*) FILTER (WHERE finished_at IS NOT NULL AND backfilled_at IS NULL)
FROM proc_state`
	const oldest = `
SELECT msg_id, coalesce(received_at, registered_at) AS since
FROM proc_state
WHERE state IN ('PENDING', 'FAILED', 'APPLIED')
ORDER BY since, msg_id
LIMIT 1`
	var b backlog
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return b, fmt.Errorf("beginning snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	c := &controlv1.StateCounts{}
	if err := tx.QueryRow(ctx, counts).Scan(&c.Pending, &c.Applied, &c.Succeeded, &c.Skipped, &c.Failed, &c.Dead, &b.unmarkedTerminal); err != nil {
		return b, fmt.Errorf("counting states: %w", err)
	}
	b.counts = c
	err = tx.QueryRow(ctx, oldest).Scan(&b.oldestID, &b.oldestSince)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return b, fmt.Errorf("finding oldest unfinished message: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return b, fmt.Errorf("ending snapshot: %w", err)
	}
	return b, nil
}

// queryFlight reads one flight row; pgx.ErrNoRows when absent.
func queryFlight(ctx context.Context, db *pgxpool.Pool, flid int64) (*controlv1.Flight, error) {
	const q = `
SELECT flid, state, state_version, to_char(operation_day, 'YYYY-MM-DD'),
       master_flid, last_msg_id, created_at, updated_at, doc::text
FROM flight
WHERE flid = $1`
	var (
		f                controlv1.Flight
		state            string
		opDay            *string
		master           *int64
		created, updated time.Time
	)
	err := db.QueryRow(ctx, q, flid).Scan(&f.Flid, &state, &f.StateVersion, &opDay,
		&master, &f.LastMsgId, &created, &updated, &f.DocJson)
	if err != nil {
		return nil, err
	}
	if f.State, err = flightStateFromDB(state); err != nil {
		return nil, err
	}
	f.OperationDay = nullable.String(opDay)
	if master != nil {
		f.MasterFlid = *master
	}
	f.CreatedAt = timestamppb.New(created)
	f.UpdatedAt = timestamppb.New(updated)
	return &f, nil
}

// outboxFilter is a validated ListOutbox request.
type outboxFilter struct {
	target  string // "" = any
	state   string // "" = any
	afterID int64
	limit   int
}

// queryOutbox returns up to limit+1 rows matching f (the extra row tells
// the caller whether another page exists). The WHERE clause names only the
// filters in use, so the planner sees each query shape separately instead of
// a generic plan with "$1 = ”" escapes.
func queryOutbox(ctx context.Context, db *pgxpool.Pool, f outboxFilter) ([]*controlv1.OutboxEntry, error) {
	conds := []string{"id > $1"}
	args := []any{f.afterID}
	if f.target != "" {
		args = append(args, f.target)
		conds = append(conds, "target = $"+strconv.Itoa(len(args)))
	}
	if f.state != "" {
		args = append(args, f.state)
		conds = append(conds, "state = $"+strconv.Itoa(len(args)))
	}
	args = append(args, f.limit+1)
	q := `
SELECT id, target, pkey, msg_id, state, attempts, next_attempt_at,
       last_error, outcome, created_at, sent_at
FROM outbox
WHERE ` + strings.Join(conds, " AND ") + `
ORDER BY id
LIMIT $` + strconv.Itoa(len(args))
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("querying outbox: %w", err)
	}
	defer rows.Close()
	var out []*controlv1.OutboxEntry
	for rows.Next() {
		var (
			e                controlv1.OutboxEntry
			state            string
			msgID            *int64
			lastErr, outcome *string
			next, created    time.Time
			sent             *time.Time
		)
		if err := rows.Scan(&e.Id, &e.Target, &e.Pkey, &msgID, &state, &e.Attempts, &next,
			&lastErr, &outcome, &created, &sent); err != nil {
			return nil, fmt.Errorf("reading outbox row: %w", err)
		}
		if e.State, err = outboxStateFromDB(state); err != nil {
			return nil, err
		}
		if msgID != nil {
			e.MsgId = *msgID
		}
		e.NextAttemptAt = timestamppb.New(next)
		e.LastError = nullable.String(lastErr)
		e.Outcome = nullable.String(outcome)
		e.CreatedAt = timestamppb.New(created)
		e.SentAt = nullable.Timestamp(sent)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading outbox rows: %w", err)
	}
	return out, nil
}
