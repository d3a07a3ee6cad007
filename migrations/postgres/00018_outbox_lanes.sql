-- +goose Up
-- Pending outbox rows are found at a cost that depends on what is pending,
-- not on what was delivered before or on when vacuum last ran (issue 11,
-- R-J5). A delivered row leaves a dead entry in every partial index of
-- pending rows until vacuum removes it, and a scan of "the oldest pending
-- rows" starts among those dead entries. So pending rows are split into two
-- lanes, each with its own index:
--
--   fresh (retry = false): rows as inserted, delivered in ID order. The
--     dispatcher scans them from a floor, the highest ID below which no
--     fresh row is left, so the dead entries of delivered rows (all below
--     the floor) are never walked again. The floor is lowered by the
--     notification below, which carries a lower bound of the IDs a
--     committed INSERT statement used.
--   retry (retry = true): rows that failed, were held back behind a failed
--     row of their key, or were re-queued. Their own index is walked from
--     its start; it holds the few rows that failed, not the history.
--
-- A column with a constant default adds no rewrite; INSERTs that do not
-- name it keep working unchanged.
ALTER TABLE outbox ADD COLUMN retry boolean NOT NULL DEFAULT false;
UPDATE outbox SET retry = true
WHERE state = 'PENDING' AND (attempts > 0 OR next_attempt_at > created_at);

CREATE INDEX outbox_fresh_idx ON outbox (target, id) WHERE state = 'PENDING' AND NOT retry;
CREATE INDEX outbox_retry_idx ON outbox (target, next_attempt_at, id) WHERE state = 'PENDING' AND retry;
CREATE INDEX outbox_retry_key_idx ON outbox (target, pkey, id) WHERE state = 'PENDING' AND retry;

-- The notification carries the sequence's last value before the statement
-- inserted its rows: every ID the statement uses is above it. It is queued
-- at once and delivered at commit, so a dispatcher that receives it lowers
-- its floors below every row the transaction added, however late the
-- transaction commits. pg_sequence_last_value needs only USAGE on the
-- sequence, which every inserting role has.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('msgx_outbox', COALESCE(pg_sequence_last_value('outbox_id_seq'::regclass), 0)::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP TRIGGER outbox_notify_trg ON outbox;
CREATE TRIGGER outbox_notify_trg BEFORE INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- A row that becomes PENDING again (an operator's re-queue) joins the
-- retry lane: its ID is below the dispatcher's floor.
-- +goose StatementBegin
CREATE FUNCTION outbox_requeued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.retry := true;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_requeued_trg BEFORE UPDATE OF state ON outbox
    FOR EACH ROW WHEN (OLD.state <> 'PENDING' AND NEW.state = 'PENDING')
    EXECUTE FUNCTION outbox_requeued();

-- +goose Down
DROP TRIGGER outbox_requeued_trg ON outbox;
DROP FUNCTION outbox_requeued();
DROP TRIGGER outbox_notify_trg ON outbox;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('msgx_outbox', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify_trg AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
DROP INDEX outbox_retry_key_idx;
DROP INDEX outbox_retry_idx;
DROP INDEX outbox_fresh_idx;
ALTER TABLE outbox DROP COLUMN retry;
