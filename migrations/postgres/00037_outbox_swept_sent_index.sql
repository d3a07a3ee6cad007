-- +goose NO TRANSACTION
-- Each statement commits on its own, so that the index is built
-- CONCURRENTLY, without blocking the processor's outbox writes; the
-- statements can run again after a failure part-way (an invalid index
-- left by a failed build is dropped first).

-- +goose Up
-- The record cleanup deletes the delivered deletions of swept flights
-- (outbox rows of no message, msg_id IS NULL) once older than the record
-- retention, a batch at a time, oldest first. It found them through the
-- NULL entries of outbox_msg_idx, every sweep deletion of the retention
-- in insertion order, reading each row to test its age: the last batch of
-- a run, finding fewer due than a batch, read all of them — 1.9 s with a
-- year of history, the daily job's longest statement (R-M5). This index
-- holds only the delivered ones, by sent_at, so that a batch reads the
-- rows it deletes and stops at the cutoff. Rows without a message are
-- only the sweep's, so the index stays small and costs the pipeline's
-- outbox writes nothing.
DROP INDEX CONCURRENTLY IF EXISTS outbox_swept_sent_idx;
CREATE INDEX CONCURRENTLY outbox_swept_sent_idx ON outbox (sent_at) WHERE msg_id IS NULL AND state = 'SENT';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS outbox_swept_sent_idx;
