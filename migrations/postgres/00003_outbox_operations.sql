-- +goose Up
-- outbox_requeue_audit: every operator re-queue of outbox rows (R-D2, R-D4,
-- R-F1): who, why, when, and exactly which rows went back to PENDING.
CREATE TABLE outbox_requeue_audit (
    id         bigserial   PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    operator   text        NOT NULL CHECK (operator <> ''),
    reason     text        NOT NULL CHECK (reason <> ''),
    outbox_ids bigint[]    NOT NULL
);

-- The dead-letter queue and the abandoned backfills are read by ID pages;
-- they are a tiny part of the outbox, so a partial index keeps those reads
-- off the delivered rows.
CREATE INDEX outbox_dead_abandoned_idx ON outbox (id) WHERE state IN ('DEAD', 'ABANDONED');

-- The schd relay checks, per FLID, whether a newer state was already
-- delivered (a re-queued or late row must never overwrite it, INV-10).
CREATE INDEX outbox_schd_key_idx ON outbox (pkey, id) WHERE target = 'schd';

-- +goose Down
DROP INDEX outbox_schd_key_idx;
DROP INDEX outbox_dead_abandoned_idx;
DROP TABLE outbox_requeue_audit;
