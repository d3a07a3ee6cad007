-- +goose Up
-- proc_state: one row per mailbox message (R-B2, INV-9). The raw XML is kept
-- here so that replay and audit never depend on the mailbox's retention.
CREATE TABLE proc_state (
    msg_id                bigint PRIMARY KEY,
    state                 text NOT NULL DEFAULT 'PENDING'
                          CHECK (state IN ('PENDING', 'APPLIED', 'SUCCEEDED', 'SKIPPED', 'FAILED', 'DEAD')),
    error_class           text CHECK (error_class IN ('MALFORMED', 'CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'PROTOCOL', 'EXHAUSTED')),
    reason                text,
    attempts              integer NOT NULL DEFAULT 0,
    next_attempt_at       timestamptz,
    processing_started_at timestamptz,
    identity_key          text UNIQUE,
    sndr                  text,
    msg_type              text,
    msg_styp              text,
    seqn                  text,
    dttm                  text,
    raw                   text NOT NULL,
    received_at           timestamptz,
    kafka_offset          bigint NOT NULL,
    registered_at         timestamptz NOT NULL DEFAULT now(),
    applied_at            timestamptz,
    finished_at           timestamptz,
    backfilled_at         timestamptz,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
-- The FIFO head is the smallest unfinished msg_id (PENDING and FAILED both
-- hold their place, INV-3).
CREATE INDEX proc_state_open_idx ON proc_state (msg_id) WHERE state IN ('PENDING', 'FAILED');
CREATE INDEX proc_state_applied_idx ON proc_state (msg_id) WHERE state = 'APPLIED';

-- consumer_offset: the processor's position in msgx.inbox, committed in the
-- same transaction as the records it registered (R-B2).
CREATE TABLE consumer_offset (
    consumer    text    NOT NULL,
    topic       text    NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint  NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, topic, partition)
);

-- flight: the authoritative current state of every flight (INV-11b). doc is
-- the complete, lossless flight document.
CREATE TABLE flight (
    flid          bigint PRIMARY KEY,
    operation_day date,
    state         text   NOT NULL CHECK (state IN ('ACTIVE', 'DELETED')),
    state_version bigint NOT NULL CHECK (state_version > 0),
    master_flid   bigint,
    last_msg_id   bigint NOT NULL,
    doc           jsonb  NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX flight_operation_day_idx ON flight (operation_day);
CREATE INDEX flight_master_idx ON flight (master_flid) WHERE master_flid IS NOT NULL;

-- projection_pending: Redis writes a message is still waiting for (INV-23).
-- An ack of (flid, v) satisfies every row of that flid with version <= v.
CREATE TABLE projection_pending (
    msg_id  bigint NOT NULL REFERENCES proc_state (msg_id) ON DELETE CASCADE,
    flid    bigint NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (msg_id, flid)
);
CREATE INDEX projection_pending_flid_idx ON projection_pending (flid, version);

-- outbox: every external side effect, relayed by the dispatcher (INV-16,
-- INV-17b). target is flight-state, msg, schd, mailbox or coutmsgs.
CREATE TABLE outbox (
    id              bigserial PRIMARY KEY,
    target          text   NOT NULL,
    pkey            text   NOT NULL,
    payload         bytea,
    headers         jsonb,
    msg_id          bigint,
    state           text   NOT NULL DEFAULT 'PENDING'
                    CHECK (state IN ('PENDING', 'SENT', 'DEAD', 'ABANDONED')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    outcome         text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);
CREATE INDEX outbox_pending_idx ON outbox (target, id) WHERE state = 'PENDING';
CREATE INDEX outbox_pending_key_idx ON outbox (target, pkey, id) WHERE state = 'PENDING';
CREATE INDEX outbox_msg_idx ON outbox (msg_id);

-- Wake the dispatcher on new outbox rows instead of polling (R-D3).
-- +goose StatementBegin
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('msgx_outbox', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify_trg AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- ref_data: static reference data by (type, key) (R-C10, C-31).
CREATE TABLE ref_data (
    type        text   NOT NULL,
    key         text   NOT NULL,
    doc         jsonb  NOT NULL,
    last_msg_id bigint NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (type, key)
);

-- +goose Down
DROP TABLE ref_data;
DROP TRIGGER outbox_notify_trg ON outbox;
DROP FUNCTION outbox_notify();
DROP TABLE outbox;
DROP TABLE projection_pending;
DROP TABLE flight;
DROP TABLE consumer_offset;
DROP TABLE proc_state;
