-- +goose NO TRANSACTION
-- Each statement commits on its own, so that the index is built
-- CONCURRENTLY, without blocking the processor's outbox writes; the
-- statements can run again after a failure part-way (an invalid index
-- left by a failed build is dropped first).

-- +goose Up
-- A flight's trail (InspectService.GetFlightTrail, `msgxctl flight trail`,
-- R-N9) reads the flight's msg events newest first: one index entry per
-- flight change (the msg row; the schd and flight-state rows of the same
-- change are not indexed). Built concurrently so that a running pipeline
-- keeps writing the outbox while it is built.
DROP INDEX CONCURRENTLY IF EXISTS outbox_msg_trail_idx;
CREATE INDEX CONCURRENTLY outbox_msg_trail_idx ON outbox (pkey, id) WHERE target = 'msg';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS outbox_msg_trail_idx;
