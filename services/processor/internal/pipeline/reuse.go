package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/procstate"
)

// Mailbox ID reuse (R-L5; C-3, PRE-3). The mailbox promises never to reuse
// an ID, and proc_state is keyed by it: the first text registered under an
// ID is the message. A record whose ID is registered already is normally a
// republish of the same text (the ingest republishes a row the mailbox
// still shows unmarked). A different text under that ID means the
// mailbox's ID space was reset or reused (a table rotation, a restore):
// that text is another message, which the mailbox owner expects to be
// processed. It cannot run under the ID — the FIFO position, the
// execution state and the mailbox marker of the ID belong to the first
// message — and running it under an ID the gateway makes up would apply a
// message at a place in the order the sender never gave it. So it is held
// for an operator, never dropped silently: stored with both texts and
// their SHA-256 hashes in mailbox_reuse, counted in
// msgx_processor_mailbox_id_reused_total and logged at ERROR with
// alert=mailbox-id-reused, once per distinct text; a republish of a held
// text only updates seen and last_seen_at. The runbook ("A mailbox ID was
// reused") says what the operator and the mailbox owner do with it.

// reusedCandidates are records whose mailbox ID is registered already:
// republishes, or reuses when their text differs.
type reusedCandidates struct {
	ids     []int64
	raws    []string
	rcv     []*time.Time
	offsets []int64
}

func (c *reusedCandidates) add(id int64, raw string, at *time.Time, offset int64) {
	c.ids, c.raws, c.rcv, c.offsets = append(c.ids, id), append(c.raws, raw), append(c.rcv, at), append(c.offsets, offset)
}

// reusedText is a held text of a reused mailbox ID.
type reusedText struct {
	msgID                   int64
	textSHA256, firstSHA256 string
	offset                  int64
	first                   bool // first seen now: counted and alerted
}

// holdReusedSQL stores, for each candidate whose text differs from the
// registered text of its ID, the text with both hashes; a text held
// before only counts one more sighting.
const holdReusedSQL = `
	WITH r AS (
		SELECT DISTINCT ON (r.id, r.raw) r.id, r.raw, r.rcv, r.off, p.raw AS first_raw
		FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::bigint[]) AS r(id, raw, rcv, off)
		JOIN proc_state p ON p.msg_id = r.id
		WHERE p.raw <> r.raw
		ORDER BY r.id, r.raw, r.off)
	INSERT INTO mailbox_reuse AS m (msg_id, text_sha256, first_sha256, raw, first_raw, received_at, kafka_offset, detected_at, last_seen_at)
	SELECT id, encode(sha256(convert_to(raw, 'UTF8')), 'hex'), encode(sha256(convert_to(first_raw, 'UTF8')), 'hex'),
		raw, first_raw, rcv, off, $5, $5
	FROM r
	ON CONFLICT (msg_id, text_sha256) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at, seen = m.seen + 1
	RETURNING msg_id, text_sha256, first_sha256, kafka_offset, seen = 1`

// holdReused runs in the registration's transaction, only when a fetch
// holds IDs registered before, so the normal path costs nothing.
func (e *Engine) holdReused(ctx context.Context, tx pgx.Tx, c reusedCandidates, now time.Time) ([]reusedText, error) {
	if len(c.ids) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, holdReusedSQL, c.ids, c.raws, c.rcv, c.offsets, now)
	if err != nil {
		return nil, fmt.Errorf("comparing texts of registered mailbox IDs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (reusedText, error) {
		var t reusedText
		err := r.Scan(&t.msgID, &t.textSHA256, &t.firstSHA256, &t.offset, &t.first)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("holding texts of reused mailbox IDs: %w", err)
	}
	return out, nil
}

// reportReused counts and logs the held texts after their registration
// committed.
func (e *Engine) reportReused(ctx context.Context, held []reusedText) {
	for _, t := range held {
		if !t.first {
			e.log.DebugContext(ctx, "republished text of a reused mailbox ID; already held", "msg_id", t.msgID, "text_sha256", t.textSHA256)
			continue
		}
		e.metrics.reused.Add(ctx, 1)
		e.log.ErrorContext(ctx, "mailbox ID came again with a different text; the text is held for an operator and not executed",
			"msg_id", t.msgID, "first_sha256", t.firstSHA256, "text_sha256", t.textSHA256, "offset", t.offset,
			"alert", "mailbox-id-reused")
	}
}

// reopenUnmarked runs in the registration's transaction, only when a fetch
// holds IDs registered before. Ingest republishes a row only while the
// mailbox shows it unmarked (and at or above ingest.mailbox.start-id in
// shadow mode, where every row is this gateway's to mark, R-L6), so a
// republished message whose backfill is settled still needs its marker:
// shadow mode never wrote it — this is how leaving shadow mode marks the
// rows of the cutover nobody marked (ingest republishes every unmarked row
// after its restart), and only those: the rows the predecessor marked are
// never republished, so no old marker floods the mailbox — or the mailbox
// lost the marker written (a restore, a failover to a replica behind).
// Without this such a row stayed unmarked for good, republished every
// republish-after. In shadow mode the new intent is settled as shadowed
// again.
func (e *Engine) reopenUnmarked(ctx context.Context, tx pgx.Tx, c reusedCandidates, now time.Time) error {
	if len(c.ids) == 0 {
		return nil
	}
	if err := procstate.ReopenUnmarked(ctx, tx, c.ids, c.raws, now); err != nil {
		return fmt.Errorf("republished mailbox IDs: %w", err)
	}
	return nil
}
