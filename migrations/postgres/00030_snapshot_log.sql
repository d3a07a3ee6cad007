-- +goose Up
-- snapshot_log: one row per daily snapshot package (SCHD DNLD, SCHD RESP)
-- the processor finished writing (R-L7, SCHD_SNAP_LOG): the operation days
-- it covered, its records, the flights it changed, deleted and left
-- unchanged, its batches, how long it took from the start of its run to its
-- last step, and the message's state after that step. Written by the
-- package's last step, in its transaction; kept 90 days (the daily
-- maintenance deletes older rows). A replayed package logs each run.
CREATE TABLE snapshot_log (
    id          bigserial   PRIMARY KEY,
    msg_id      bigint      NOT NULL,
    styp        text        NOT NULL,
    days        date[]      NOT NULL,
    records     integer     NOT NULL CHECK (records >= 0),
    changed     integer     NOT NULL CHECK (changed >= 0),
    deleted     integer     NOT NULL CHECK (deleted >= 0),
    unchanged   integer     NOT NULL CHECK (unchanged >= 0),
    batches     integer     NOT NULL CHECK (batches >= 1),
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    outcome     text        NOT NULL
);
CREATE INDEX snapshot_log_msg_id_idx ON snapshot_log (msg_id);
CREATE INDEX snapshot_log_finished_at_idx ON snapshot_log (finished_at);

-- +goose Down
DROP TABLE snapshot_log;
