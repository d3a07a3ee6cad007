-- +goose Up
-- The lanes of 00018 index every pending outbox row (outbox_fresh_idx,
-- outbox_retry_idx, outbox_retry_key_idx), and no query of the relay, the
-- gauges or the control plane reads the two indexes of all pending rows
-- any more. Each cost two index entries on every outbox row the processor
-- inserts (three rows per flight change), and their dead entries were what
-- a stale plan could walk instead of a lane (issue 11, R-J1, R-J5).
DROP INDEX outbox_pending_idx;
DROP INDEX outbox_pending_key_idx;

-- +goose Down
CREATE INDEX outbox_pending_idx ON outbox (target, id) WHERE state = 'PENDING';
CREATE INDEX outbox_pending_key_idx ON outbox (target, pkey, id) WHERE state = 'PENDING';
