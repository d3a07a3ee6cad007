-- +goose Up
-- mailbox_census: an operator's request, recorded by the control plane, for
-- the figures of the shared mailbox (CMINMSGS) that the cutover from the
-- predecessor asks for (R-L6, R-N9). The control plane cannot read the
-- mailbox; any dispatcher instance takes a PENDING request (started_at set
-- while it counts, a stale one taken again), counts with its own read-only
-- grants and records the figures or the error. Who asked stays as written:
-- the row is also an audit row. Additive only (R-M4).
--
-- The figures: next_id is MAX(CMINMSGS_ID) + 1 (1 for an empty mailbox);
-- after_last_marked is the ID after the largest marked one (1 when no row
-- is marked); with start_id, rows_from_start counts the rows from it on,
-- unmarked_from_start and unmarked_below_start the unmarked rows from it on
-- and below it (NULL without start_id).
CREATE TABLE mailbox_census (
    id                   bigserial   PRIMARY KEY,
    start_id             bigint      CHECK (start_id > 0),
    operator             text        NOT NULL CHECK (btrim(operator) <> ''),
    principal            text,
    peer                 text,
    requested_at         timestamptz NOT NULL,
    state                text        NOT NULL DEFAULT 'PENDING' CHECK (state IN ('PENDING', 'DONE', 'FAILED')),
    started_at           timestamptz,
    finished_at          timestamptz,
    next_id              bigint,
    rows_from_start      bigint,
    after_last_marked    bigint,
    unmarked_from_start  bigint,
    unmarked_below_start bigint,
    error                text,
    CONSTRAINT mailbox_census_done_chk CHECK ((state = 'PENDING') = (finished_at IS NULL))
);
CREATE INDEX mailbox_census_pending_idx ON mailbox_census (id) WHERE state = 'PENDING';

-- +goose Down
DROP TABLE mailbox_census;
