-- +goose Up
-- backfill_outcome: how the message's backfill finished (R-D4). A backfill
-- is finished when backfilled_at is set; the outcome says whether the
-- processed marker is on the mailbox row ('written', 'already-marked') or
-- never will be ('abandoned': the mailbox row was missing; 'discarded': an
-- operator discarded a marker that gave up). A finished backfill leaves
-- proc_state_unmarked_idx, so the unmarked-backlog gauges and the
-- self-check stop counting it, while the abandoned ones stay listed and
-- counted by their outbox row. NULL for a backfill not finished yet, and
-- for one finished before this migration (written or already-marked).
-- Adding a nullable column without a default rewrites nothing; the check
-- is NOT VALID because no existing row can break it and validating it
-- would read the whole table under the lock.
ALTER TABLE proc_state ADD COLUMN backfill_outcome text;
ALTER TABLE proc_state ADD CONSTRAINT proc_state_backfill_outcome_check
    CHECK (backfill_outcome IN ('written', 'already-marked', 'abandoned', 'discarded')) NOT VALID;

-- Backfills abandoned before this migration are finished now, at the time
-- the dispatcher found their row missing.
UPDATE proc_state p SET backfilled_at = COALESCE(o.sent_at, o.created_at), backfill_outcome = 'abandoned'
FROM outbox o
WHERE o.state = 'ABANDONED' AND o.target = 'mailbox' AND o.msg_id = p.msg_id AND p.backfilled_at IS NULL;

-- DISCARDED: an operator ended a DEAD outbox row (AdminService.DiscardOutbox)
-- or acknowledged an ABANDONED backfill (AdminService.AcknowledgeBackfills):
-- terminal, never delivered, out of the dead-letter queue and the
-- abandoned list. The row keeps its outcome and last error for the record.
ALTER TABLE outbox DROP CONSTRAINT outbox_state_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_state_check
    CHECK (state IN ('PENDING', 'SENT', 'DEAD', 'ABANDONED', 'DISCARDED'));

-- outbox_discard_audit: every discard and acknowledge (R-D2, R-D4, R-F1,
-- R-H9): what the caller declared (operator, reason), what the control
-- plane proved and saw (principal, peer), and exactly which rows were
-- ended. Append-only for the control plane, like outbox_requeue_audit.
CREATE TABLE outbox_discard_audit (
    id         bigserial   PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    action     text        NOT NULL CHECK (action IN ('discard', 'acknowledge')),
    operator   text        NOT NULL CHECK (operator <> ''),
    reason     text        NOT NULL CHECK (reason <> ''),
    outbox_ids bigint[]    NOT NULL,
    principal  text,
    peer       text
);

-- +goose Down
DROP TABLE outbox_discard_audit;
-- A discarded row goes back to what it was: an acknowledged abandoned
-- backfill (outcome row-missing) to ABANDONED, every other one to DEAD.
UPDATE outbox SET state = CASE WHEN target = 'mailbox' AND outcome = 'row-missing' THEN 'ABANDONED' ELSE 'DEAD' END
WHERE state = 'DISCARDED';
ALTER TABLE outbox DROP CONSTRAINT outbox_state_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_state_check
    CHECK (state IN ('PENDING', 'SENT', 'DEAD', 'ABANDONED'));
-- Abandoned and discarded backfills are unfinished again, as the code of
-- the previous release counts them.
UPDATE proc_state SET backfilled_at = NULL WHERE backfill_outcome IN ('abandoned', 'discarded');
ALTER TABLE proc_state DROP CONSTRAINT proc_state_backfill_outcome_check;
ALTER TABLE proc_state DROP COLUMN backfill_outcome;
