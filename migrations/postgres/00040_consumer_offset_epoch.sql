-- +goose Up
-- consumer_offset also keeps the leader epoch of the last record a
-- consumer read before next_offset (KIP-320). A broker that lost records
-- it had acknowledged (an unclean leader election) hands their offsets out
-- again to new records; once producers wrote past the old end, a position
-- alone cannot tell the new records from the ones read, but the epoch
-- can: the consumer asks the leader where that epoch ended, and a log
-- that diverged before the position is reported and read again from
-- there (services/processor, brokerloss.go).
--
-- epoch_next_offset is the next_offset the epoch was stored with. The
-- epoch holds only while the two are equal: the previous release, during
-- a rolling upgrade, moves next_offset without knowing the epoch, and a
-- stale epoch would be asked about an offset it does not cover.
--
-- Expand only (R-M4, docs/deployment.md): the previous release neither
-- reads nor writes the new columns; adding nullable columns rewrites no
-- row.
ALTER TABLE consumer_offset
    ADD COLUMN leader_epoch      integer,
    ADD COLUMN epoch_next_offset bigint;

-- +goose Down
ALTER TABLE consumer_offset
    DROP COLUMN epoch_next_offset,
    DROP COLUMN leader_epoch;
