-- +goose NO TRANSACTION
-- Each statement commits on its own, so that the index is built
-- CONCURRENTLY, without blocking the processor's writes on a large
-- proc_state. Every statement can run again after a failure part-way.

-- +goose Up
-- The terminal messages whose mailbox marker is not written yet, by finish
-- time: the processor's self-check (R-H4) reads those finished before its
-- grace cutoff every self-check interval, and the backlog gauges
-- (msgx_unmarked_terminal, msgx_oldest_unmarked_seconds) read them at every
-- scrape. It holds only the messages between their terminal state and
-- their marker — a short queue — so neither reads the terminal history. A
-- row enters it when the message becomes terminal and leaves it when the
-- marker is recorded; both updates already change indexed columns
-- (proc_state_cleanup_idx), so it costs no HOT update.
DROP INDEX CONCURRENTLY IF EXISTS proc_state_unmarked_idx;
CREATE INDEX CONCURRENTLY proc_state_unmarked_idx ON proc_state (finished_at, msg_id)
    WHERE finished_at IS NOT NULL AND backfilled_at IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS proc_state_unmarked_idx;
