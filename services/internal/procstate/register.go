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

// CleanedRepublishReason is the reason of a record finished SKIPPED at
// its registration because the record cleanup deleted the shadowed record
// of its mailbox ID (R-L6, shadow_cleanup).
const CleanedRepublishReason = "republished after the record cleanup deleted its shadowed record: processed before, not executed again (R-L6)"

// registerSQL registers each record once (ON CONFLICT DO NOTHING, INV-9).
// A mailbox ID in the range of shadow_cleanup is not a new message: the
// cleanup deleted its shadowed record, so the row comes again only
// because shadow mode never marked it (R-L6). It is registered SKIPPED,
// finished with its mailbox intent in the same statement (INV-8), so it
// is never executed a second time and the row still gets its marker once
// the gateway marks. The second column says which of the two it was.
var registerSQL = `WITH c AS (SELECT min_msg_id, max_msg_id FROM shadow_cleanup WHERE id = 1),
	r AS (
		SELECT r.*, EXISTS (SELECT 1 FROM c WHERE r.id BETWEEN c.min_msg_id AND c.max_msg_id) AS cleaned
		FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::bigint[], $6::text[], $7::text[]) AS r(id, raw, rcv, off, tp, ts)),
	fresh AS (
		INSERT INTO proc_state (msg_id, raw, received_at, kafka_offset, registered_at, updated_at, trace_parent, trace_state)
		SELECT id, raw, rcv, off, $5, $5, NULLIF(tp, ''), NULLIF(ts, '') FROM r WHERE NOT cleaned
		ON CONFLICT (msg_id) DO NOTHING RETURNING msg_id),
	gone AS (
		INSERT INTO proc_state (msg_id, raw, received_at, kafka_offset, registered_at, updated_at, state, reason, finished_at)
		SELECT id, raw, rcv, off, $5, $5, 'SKIPPED', $8, $5 FROM r WHERE cleaned
		ON CONFLICT (msg_id) DO NOTHING RETURNING msg_id),
	intents AS (` + outbox.InsertMailboxIntent("gone", 5) + `)
	SELECT msg_id, false FROM fresh UNION ALL SELECT msg_id, true FROM gone`

// QueueRegister queues the registration of rows at at on b as one
// statement; done receives the mailbox IDs it inserted as PENDING
// messages and those it finished SKIPPED because the cleanup deleted
// their shadowed record (registerSQL). An ID registered before (a
// republished record) inserts nothing (INV-9): the caller tells a
// republish from a reused ID by the text.
func QueueRegister(b *pgx.Batch, rows []Register, at time.Time, done func(inserted, cleaned []int64) error) {
	n := len(rows)
	ids, raws, rcvs, offsets, parents, states := make([]int64, n), make([]string, n), make([]*time.Time, n), make([]int64, n), make([]string, n), make([]string, n)
	for i, r := range rows {
		ids[i], raws[i], rcvs[i], offsets[i], parents[i], states[i] = r.MsgID, r.Raw, r.ReceivedAt, r.Offset, r.TraceParent, r.TraceState
	}
	b.Queue(registerSQL, ids, raws, rcvs, offsets, at, parents, states, CleanedRepublishReason).Query(func(rs pgx.Rows) error {
		var inserted, cleaned []int64
		var id int64
		var gone bool
		if _, err := pgx.ForEachRow(rs, []any{&id, &gone}, func() error {
			if gone {
				cleaned = append(cleaned, id)
			} else {
				inserted = append(inserted, id)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("registering inbox records: %w", err)
		}
		return done(inserted, cleaned)
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
