-- +goose Up
-- projection_rebuild: every operator rebuild of the Redis projection from
-- PostgreSQL (R-E4, INV-11b). One row per RebuildProjection call, written
-- in the transaction that enqueues the rebuild's outbox rows: one
-- flight-state record per flight and the manifest (target
-- projection-control). id is the rebuild's generation: the records carry it
-- in their msgx-rebuild header and the manifest in "generation".
--   flights, active, deleted: the flight rows read (ACTIVE + DELETED);
--   max_msg_id: the largest flight.last_msg_id at that moment;
--   first_outbox_id, last_outbox_id: the range holding the rebuild's
--     flight-state rows (NULL when there was no flight);
--   manifest_outbox_id: the manifest's outbox row.
CREATE TABLE projection_rebuild (
    id                 bigserial   PRIMARY KEY,
    operator           text        NOT NULL CHECK (operator <> ''),
    reason             text        NOT NULL CHECK (reason <> ''),
    flights            integer     NOT NULL CHECK (flights >= 0),
    active             integer     NOT NULL CHECK (active >= 0),
    deleted            integer     NOT NULL CHECK (deleted >= 0),
    max_msg_id         bigint      NOT NULL,
    first_outbox_id    bigint,
    last_outbox_id     bigint,
    manifest_outbox_id bigint      NOT NULL,
    requested_at       timestamptz NOT NULL
);

-- +goose Down
DROP TABLE projection_rebuild;
