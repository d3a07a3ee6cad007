-- +goose NO TRANSACTION
-- Each statement commits on its own, so that the new indexes are built
-- CONCURRENTLY, without blocking the processor's writes on a large
-- proc_state. Every statement can run again after a failure part-way.

-- +goose Up
-- OPERATOR: the error class of a message an operator ended with
-- AdminService.EndMessage (R-H3). The constraint is swapped in one
-- statement and added NOT VALID (no scan under the exclusive lock; every
-- existing row passed the stricter check), then validated under a lock that
-- lets reads and writes go on.
ALTER TABLE proc_state
    DROP CONSTRAINT IF EXISTS proc_state_error_class_check,
    ADD CONSTRAINT proc_state_error_class_check
        CHECK (error_class IN ('MALFORMED', 'CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'PROTOCOL', 'EXHAUSTED', 'OPERATOR')) NOT VALID;
ALTER TABLE proc_state VALIDATE CONSTRAINT proc_state_error_class_check;

-- message_end_audit: one row per message an operator ended as DEAD (R-H3),
-- written in the transaction that ends it: who, why, when, what the
-- message was before, and the outbox row of its backfill intent. No
-- foreign key to proc_state: the audit outlives the record cleanup (R-B10).
CREATE TABLE IF NOT EXISTS message_end_audit (
    id                 bigserial   PRIMARY KEY,
    msg_id             bigint      NOT NULL,
    operator           text        NOT NULL CHECK (btrim(operator) <> ''),
    reason             text        NOT NULL CHECK (btrim(reason) <> ''),
    previous_state     text        NOT NULL CHECK (previous_state IN ('PENDING', 'FAILED', 'APPLIED')),
    previous_class     text,
    previous_attempts  integer     NOT NULL,
    previous_reason    text,
    backfill_outbox_id bigint      NOT NULL,
    at                 timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS message_end_audit_msg_idx ON message_end_audit (msg_id);

-- AdminService.ListMessages reads proc_state in msg_id order, one ordered
-- index range per requested state. PENDING and FAILED (proc_state_open_idx)
-- and APPLIED (proc_state_applied_idx) are already indexed; SUCCEEDED is
-- nearly every row, so the primary key finds it at once. This index serves
-- the two sparse terminal states. A row enters it once, when the message
-- becomes terminal, and never changes again.
DROP INDEX CONCURRENTLY IF EXISTS proc_state_dead_skipped_idx;
CREATE INDEX CONCURRENTLY proc_state_dead_skipped_idx ON proc_state (state, msg_id) WHERE state IN ('DEAD', 'SKIPPED');

-- The time filter of ListMessages is received_at, or registered_at where
-- the mailbox gave no time. Both are written once, at registration, so the
-- index costs one insert per message and never stops a HOT update.
DROP INDEX CONCURRENTLY IF EXISTS proc_state_received_idx;
CREATE INDEX CONCURRENTLY proc_state_received_idx ON proc_state ((COALESCE(received_at, registered_at)), msg_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS proc_state_received_idx;
DROP INDEX CONCURRENTLY IF EXISTS proc_state_dead_skipped_idx;
DROP TABLE IF EXISTS message_end_audit;
-- Rows ended by an operator keep their class: the old list comes back NOT
-- VALID, so it binds new writes only.
ALTER TABLE proc_state
    DROP CONSTRAINT IF EXISTS proc_state_error_class_check,
    ADD CONSTRAINT proc_state_error_class_check
        CHECK (error_class IN ('MALFORMED', 'CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'PROTOCOL', 'EXHAUSTED')) NOT VALID;
