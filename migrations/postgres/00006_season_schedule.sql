-- +goose Up
-- season_schedule: one season window of a season schedule (SCHS DNLD or
-- RESP, R-C9, catalogue §4), keyed by the window as sent: season name,
-- airport, start and end date (DDMMMYY, trimmed). Season data is its own
-- document set: it never reads or writes the daily flight state.
CREATE TABLE season_schedule (
    id          bigserial   PRIMARY KEY,
    snam        text        NOT NULL,
    apcd        text        NOT NULL,
    sdat        text        NOT NULL,
    edat        text        NOT NULL,
    -- start_date and end_date are sdat and edat read as dates.
    start_date  date        NOT NULL,
    end_date    date        NOT NULL CHECK (end_date >= start_date),
    -- flights is the number of season_flight rows of the window.
    flights     integer     NOT NULL,
    -- last_msg_id is the message that last replaced the window's flights.
    last_msg_id bigint      NOT NULL,
    updated_at  timestamptz NOT NULL,
    UNIQUE (snam, apcd, sdat, edat)
);

-- season_flight: the flight patterns of a window, replaced as a whole (all
-- rows deleted, the message's rows inserted) in the transaction of the
-- message that carries them. seq is the FLTR's position in that message
-- (1-based); doc is the lossless FLTR document (the flight-document
-- mapping: element → string, object with "@attr"/"#text", lists as
-- arrays), nothing normalised or dropped.
CREATE TABLE season_flight (
    season_id bigint  NOT NULL REFERENCES season_schedule (id) ON DELETE CASCADE,
    seq       integer NOT NULL CHECK (seq > 0),
    alcd      text    NOT NULL,
    flno      text    NOT NULL,
    mvin      text    NOT NULL,
    doc       jsonb   NOT NULL,
    PRIMARY KEY (season_id, seq)
);
CREATE INDEX season_flight_flno_idx ON season_flight (flno);

-- snapshot_progress: how far a daily snapshot (SCHD DNLD/RESP) written in
-- batches has got (R-C6, US-07). Each batch commits its flights, their
-- events and this row in one transaction; the message stays open
-- (PENDING or FAILED) until the last batch, which also deletes this row
-- and writes the terminal state. started_at is the message's
-- processing_started_at when the row was written: a row of an earlier run
-- (before an operator replay, which clears processing_started_at) is not
-- resumed. Losing the row is harmless: the package is then redone from its
-- first record and unchanged documents are not rewritten.
CREATE TABLE snapshot_progress (
    msg_id      bigint      PRIMARY KEY REFERENCES proc_state (msg_id) ON DELETE CASCADE,
    started_at  timestamptz,
    next_record integer     NOT NULL CHECK (next_record >= 0),
    changed     integer     NOT NULL DEFAULT 0,
    deleted     integer     NOT NULL DEFAULT 0,
    batches     integer     NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL
);

-- +goose Down
DROP TABLE snapshot_progress;
DROP TABLE season_flight;
DROP TABLE season_schedule;
