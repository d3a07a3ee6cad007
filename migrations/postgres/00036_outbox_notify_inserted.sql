-- +goose Up
-- The outbox notification announces a statement only when it inserted
-- rows. The BEFORE INSERT statement trigger of 00018 notified from every
-- INSERT into outbox, including the many that insert nothing: the mailbox
-- intent of a registration batch that finished no message, of an ack batch
-- that satisfied no message. Each such notification woke every dispatcher
-- loop for a read of its lanes that found nothing, and it carried the same
-- lower bound as the next real insert, so nothing could tell which
-- transaction a notification announced.
--
-- The lower bound is still taken before the statement draws IDs (the
-- sequence's last value, a bound of every ID the statement uses), but is
-- only remembered, in a transaction-local setting; the AFTER INSERT
-- statement trigger notifies with it when the sequence moved past it, and
-- clears it. A statement with two outbox INSERTs (two common table
-- expressions) keeps the lower of the two bounds and notifies once. A
-- concurrent insert elsewhere can make an empty statement notify all the
-- same: a spare wake-up, as before. A statement that fails takes the
-- setting with it (its transaction or savepoint rolls back). The payload
-- keeps its meaning, so the previous release's dispatcher reads it as
-- before (additive, R-M4).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF COALESCE(current_setting('msgx.outbox_below', true), '') = '' THEN
        PERFORM set_config('msgx.outbox_below',
            COALESCE(pg_sequence_last_value('outbox_id_seq'::regclass), 0)::text, true);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION outbox_announce() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    below text := COALESCE(current_setting('msgx.outbox_below', true), '');
BEGIN
    IF below = '' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('msgx.outbox_below', '', true);
    IF COALESCE(pg_sequence_last_value('outbox_id_seq'::regclass), 0) > below::bigint THEN
        PERFORM pg_notify('msgx_outbox', below);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_announce_trg AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_announce();

-- +goose Down
DROP TRIGGER outbox_announce_trg ON outbox;
DROP FUNCTION outbox_announce();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('msgx_outbox', COALESCE(pg_sequence_last_value('outbox_id_seq'::regclass), 0)::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
