package procstate

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/outbox"
)

// Register is one inbox record registered as a PENDING message (R-B2):
// the first record of its mailbox ID, with the trace context its
// execution continues (R-I4; "" for none).
type Register struct {
	MsgID       int64
	Raw         string
	ReceivedAt  *time.Time
	Offset      int64
	TraceParent string
	TraceState  string
}

const registerSQL = `INSERT INTO proc_state (msg_id, raw, received_at, kafka_offset, registered_at, updated_at, trace_parent, trace_state)
	SELECT id, raw, rcv, off, $5, $5, NULLIF(tp, ''), NULLIF(ts, '')
	FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::bigint[], $6::text[], $7::text[]) AS r(id, raw, rcv, off, tp, ts)
	ON CONFLICT (msg_id) DO NOTHING RETURNING msg_id`

// QueueRegister queues the registration of rows at at on b as one
// statement; done receives the mailbox IDs it inserted. An ID registered
// before (a republished record) inserts nothing (INV-9): the caller tells
// a republish from a reused ID by the text.
func QueueRegister(b *pgx.Batch, rows []Register, at time.Time, done func(inserted []int64) error) {
	n := len(rows)
	ids, raws, rcvs, offsets, parents, states := make([]int64, n), make([]string, n), make([]*time.Time, n), make([]int64, n), make([]string, n), make([]string, n)
	for i, r := range rows {
		ids[i], raws[i], rcvs[i], offsets[i], parents[i], states[i] = r.MsgID, r.Raw, r.ReceivedAt, r.Offset, r.TraceParent, r.TraceState
	}
	b.Queue(registerSQL, ids, raws, rcvs, offsets, at, parents, states).Query(func(rs pgx.Rows) error {
		inserted, err := pgx.CollectRows(rs, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("registering inbox records: %w", err)
		}
		return done(inserted)
	})
}

// registerDeadSQL registers a record DEAD(MALFORMED) and finishes it with
// its mailbox intent in one statement (INV-8).
var registerDeadSQL = `WITH i AS (
	INSERT INTO proc_state (msg_id, raw, received_at, kafka_offset, registered_at, updated_at,
	                        state, error_class, reason, finished_at)
	VALUES ($1, $2, $3, $4, $5, $5, 'DEAD', 'MALFORMED', $6, $5)
	ON CONFLICT (msg_id) DO NOTHING RETURNING msg_id)
` + outbox.InsertMailboxIntent("i", 5) + ` RETURNING msg_id`

// QueueRegisterDead queues the registration of a record that cannot be a
// message — its bytes are not storable text — as DEAD(MALFORMED) with
// reason, finished at at with its mailbox intent, so that it never blocks
// the records after it. r.Raw is the readable replacement kept for
// operators. done reports whether it was inserted (false: registered
// before).
func QueueRegisterDead(b *pgx.Batch, r Register, reason string, at time.Time, done func(inserted bool) error) {
	b.Queue(registerDeadSQL, r.MsgID, r.Raw, r.ReceivedAt, r.Offset, at, reason).Query(func(rs pgx.Rows) error {
		ids, err := pgx.CollectRows(rs, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("registering unreadable inbox record %d: %w", r.MsgID, err)
		}
		return done(len(ids) > 0)
	})
}
