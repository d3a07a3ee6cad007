-- +goose Up
-- outbox_requeue_audit also records the re-sends of delivered rows
-- (AdminService.ResendOutbox): a broker that lost records it had
-- acknowledged — an unclean leader election, a broker restored from a
-- copy — is answered by sending a Kafka target's rows of a time window
-- again (docs/runbook.md "The broker lost acknowledged records"). The
-- audit says which call it was, and the target and window a re-send
-- named.
--
-- Expand only (R-M4, docs/deployment.md): the previous release inserts
-- without the new columns and gets action 'requeue', what its calls are;
-- adding a column with a constant default rewrites no row.
ALTER TABLE outbox_requeue_audit
    ADD COLUMN action     text NOT NULL DEFAULT 'requeue' CHECK (action IN ('requeue', 'resend')),
    ADD COLUMN target     text,
    ADD COLUMN sent_since timestamptz,
    ADD COLUMN sent_until timestamptz;

-- +goose Down
ALTER TABLE outbox_requeue_audit
    DROP COLUMN sent_until,
    DROP COLUMN sent_since,
    DROP COLUMN target,
    DROP COLUMN action;
