-- +goose Up
-- shadow_cleanup: the mailbox IDs whose shadowed records the record cleanup
-- deleted (R-L6). A record whose marker shadow mode settled unwritten
-- (backfill outcome shadowed) belongs to a mailbox row that may still be
-- unmarked: the predecessor's straggler, or a row from the cutover's START
-- on. When ingest publishes such a row again after the cleanup deleted
-- the record — a republish, a restart, the switch to live — the ID must
-- not be registered as a new message and executed a second time. The
-- cleanup keeps the smallest and the largest such ID here, in the
-- transaction that deletes the records; registration finishes a record
-- of an unregistered ID in that range SKIPPED at once, with its marker
-- intent, without executing it. One row (id 1), written only by the
-- processor; absent until a shadowed record is deleted. Additive only
-- (R-M4): the previous release neither reads nor writes it.
CREATE TABLE shadow_cleanup (
    id         smallint    PRIMARY KEY CHECK (id = 1),
    min_msg_id bigint      NOT NULL,
    max_msg_id bigint      NOT NULL,
    records    bigint      NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT shadow_cleanup_range_chk CHECK (0 < min_msg_id AND min_msg_id <= max_msg_id)
);

-- +goose Down
DROP TABLE shadow_cleanup;
