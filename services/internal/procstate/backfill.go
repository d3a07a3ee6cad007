package procstate

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"msgexchange/services/internal/outbox"
)

// RecordBackfill returns the UPDATE that ends a WITH statement whose
// common table expression cte settles mailbox intents and returns their
// msg_id, state, outcome and sent_at (the dispatcher's): the backfill of
// every message whose marker was written (SENT) or can never be
// (ABANDONED, outcome $abandoned) is finished — backfilled_at and
// backfill_outcome — in the same statement, so the unmarked backlog stops
// counting it (R-D4).
func RecordBackfill(cte string, abandoned int) string {
	return `UPDATE proc_state p SET backfilled_at = ` + cte + `.sent_at,
	backfill_outcome = CASE WHEN ` + cte + `.state = 'ABANDONED' THEN $` + strconv.Itoa(abandoned) + ` ELSE ` + cte + `.outcome END
FROM ` + cte + ` WHERE p.msg_id = ` + cte + `.msg_id AND ` + cte + `.state IN ('SENT', 'ABANDONED')`
}

// ReopenBackfills returns to the unmarked backlog the messages of the
// re-queued mailbox intents outboxIDs whose backfill was abandoned: it is
// unfinished again until the marker is recorded.
func ReopenBackfills(ctx context.Context, db DB, outboxIDs []int64) error {
	if _, err := db.Exec(ctx, `UPDATE proc_state SET backfilled_at = NULL, backfill_outcome = NULL
WHERE backfill_outcome = 'abandoned' AND msg_id IN (SELECT msg_id FROM outbox WHERE id = ANY($1) AND target = 'mailbox')`, outboxIDs); err != nil {
		return fmt.Errorf("reopening re-queued backfills: %w", err)
	}
	return nil
}

// DiscardBackfills finishes, at at, the backfill of the messages whose
// mailbox intent an operator discarded: they leave the unmarked backlog
// (proc_state_unmarked_idx) for good.
func DiscardBackfills(ctx context.Context, db DB, msgIDs []int64, at time.Time) error {
	if _, err := db.Exec(ctx, `UPDATE proc_state SET backfilled_at = $1, backfill_outcome = 'discarded'
WHERE msg_id = ANY($2) AND backfilled_at IS NULL`, at, msgIDs); err != nil {
		return fmt.Errorf("finishing discarded backfills: %w", err)
	}
	return nil
}

// ReopenUnmarked opens again, at at, the backfill of each republished
// message ids[i] whose text is still raws[i] and whose marker is not in the
// mailbox although its backfill is settled: shadow mode settled it
// unwritten (outcome shadowed, R-L6), or the marker was written (written,
// already-marked) and the mailbox lost it — restored from a backup, failed
// over to a replica that had not received it. Ingest republishes only rows
// it reads unmarked, so a republish of such a message says its row needs
// the marker again (INV-8; C-5: the marker is written only where the row
// holds none). Its outcome is cleared and a new mailbox intent written, in
// one statement; a marker that landed meanwhile makes the new intent
// already-marked, nothing more.
func ReopenUnmarked(ctx context.Context, db DB, ids []int64, raws []string, at time.Time) error {
	if _, err := db.Exec(ctx, `
	WITH r AS (
		UPDATE proc_state p SET backfilled_at = NULL, backfill_outcome = NULL
		FROM unnest($1::bigint[], $2::text[]) AS c(id, raw)
		WHERE p.msg_id = c.id AND p.raw = c.raw AND p.backfill_outcome IN ('shadowed', 'written', 'already-marked')
		RETURNING p.msg_id)
	`+outbox.InsertMailboxIntent("r", 3), ids, raws, at); err != nil {
		return fmt.Errorf("opening settled backfills of unmarked rows again: %w", err)
	}
	return nil
}
