-- +goose Up
-- replay_request: an operator's replay (R-F1, US-10), written by the control
-- plane and applied by the processor's executor, the only writer of
-- proc_state, at the start of its next step. msg_ids are the messages that
-- were replayable when the request was made; the executor re-checks each
-- one and counts the rest as refused.
CREATE TABLE replay_request (
    id           bigserial   PRIMARY KEY,
    msg_ids      bigint[]    NOT NULL CHECK (cardinality(msg_ids) > 0),
    selector     jsonb       NOT NULL,
    operator     text        NOT NULL CHECK (btrim(operator) <> ''),
    reason       text        NOT NULL CHECK (btrim(reason) <> ''),
    state        text        NOT NULL DEFAULT 'PENDING' CHECK (state IN ('PENDING', 'DONE')),
    requested_at timestamptz NOT NULL,
    applied_at   timestamptz,
    replayed     integer,
    refused      integer,
    refused_ids  bigint[],
    CONSTRAINT replay_request_done_chk CHECK (
        (state = 'DONE') = (applied_at IS NOT NULL AND replayed IS NOT NULL AND refused IS NOT NULL AND refused_ids IS NOT NULL))
);
CREATE INDEX replay_request_pending_idx ON replay_request (id) WHERE state = 'PENDING';

-- replay_audit: one row per message a replay moved back to PENDING, with
-- what it was before. No foreign key to proc_state: the audit outlives the
-- record cleanup (R-B10).
CREATE TABLE replay_audit (
    id                bigserial   PRIMARY KEY,
    msg_id            bigint      NOT NULL,
    request_id        bigint      NOT NULL REFERENCES replay_request (id),
    operator          text        NOT NULL,
    reason            text        NOT NULL,
    previous_state    text        NOT NULL,
    previous_class    text,
    previous_attempts integer     NOT NULL,
    previous_reason   text,
    at                timestamptz NOT NULL
);
CREATE INDEX replay_audit_msg_idx ON replay_audit (msg_id);
CREATE INDEX replay_audit_request_idx ON replay_audit (request_id, msg_id);

-- flight_history: flights moved out of the live flight table by the history
-- sweep (R-C11, INV-28), exactly as they were. A (flid, state_version) is
-- written once; the live row is deleted in the same transaction only after
-- its history row is in place.
CREATE TABLE flight_history (
    flid          bigint      NOT NULL,
    state_version bigint      NOT NULL,
    operation_day date        NOT NULL,
    state         text        NOT NULL CHECK (state IN ('ACTIVE', 'DELETED')),
    master_flid   bigint,
    last_msg_id   bigint      NOT NULL,
    doc           jsonb       NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    archived_at   timestamptz NOT NULL,
    PRIMARY KEY (flid, state_version)
);
CREATE INDEX flight_history_operation_day_idx ON flight_history (operation_day);

-- maintenance_run: one row per daily maintenance run of the processor
-- (record cleanup R-B10, history sweep R-C11) with what it did. A run
-- that finished without error serves its scheduled occurrence, so a
-- processor that was down at run-at catches up once when it starts.
CREATE TABLE maintenance_run (
    id                bigserial   PRIMARY KEY,
    scheduled_for     timestamptz NOT NULL,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz,
    records_deleted   bigint,
    outbox_deleted    bigint,
    flights_archived  bigint,
    flights_skipped   bigint,
    flights_failed    bigint,
    tombstones        bigint,
    error             text
);
CREATE INDEX maintenance_run_scheduled_idx ON maintenance_run (scheduled_for);

-- The record cleanup reads terminal, backfilled messages by finish time.
CREATE INDEX proc_state_cleanup_idx ON proc_state (finished_at) WHERE backfilled_at IS NOT NULL;

-- +goose Down
DROP INDEX proc_state_cleanup_idx;
DROP TABLE maintenance_run;
DROP TABLE flight_history;
DROP TABLE replay_audit;
DROP TABLE replay_request;
