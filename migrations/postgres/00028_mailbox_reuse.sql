-- +goose Up
-- mailbox_reuse: a mailbox ID that came again with a different text
-- (R-L5; the mailbox's ID space must never be reused, C-3, PRE-3). The
-- registered message keeps its ID and its first text (proc_state); the
-- other text is held here, for an operator, with both texts and their
-- SHA-256 hashes, and is never executed under that ID. One row per
-- mailbox ID and distinct text: the mailbox republishes an unmarked row,
-- and a republish of a held text only counts (seen, last_seen_at).
CREATE TABLE IF NOT EXISTS mailbox_reuse (
    msg_id         bigint      NOT NULL,
    text_sha256    text        NOT NULL,
    first_sha256   text        NOT NULL,
    raw            text        NOT NULL,
    first_raw      text        NOT NULL,
    received_at    timestamptz,
    kafka_offset   bigint      NOT NULL,
    detected_at    timestamptz NOT NULL,
    last_seen_at   timestamptz NOT NULL,
    seen           integer     NOT NULL DEFAULT 1,
    PRIMARY KEY (msg_id, text_sha256)
);

-- +goose Down
DROP TABLE IF EXISTS mailbox_reuse;
