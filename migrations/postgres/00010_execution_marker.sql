-- +goose Up
-- executing_by: the processor instance whose execution of this message is
-- in flight (R-H1), NULL when none is. The executor writes it for the next
-- head in the transaction that finishes the previous one (or, for the
-- first head after a start, an idle spell or a backoff, in a transaction of
-- its own) and clears it with the message's outcome. A head found carrying
-- another instance's marker was being executed when that instance's
-- process ended (panic, out-of-memory kill, liveness kill, SIGKILL): the
-- execution counts as a failed attempt. Adding a nullable column without a
-- default rewrites nothing.
ALTER TABLE proc_state ADD COLUMN IF NOT EXISTS executing_by text;

-- +goose Down
ALTER TABLE proc_state DROP COLUMN IF EXISTS executing_by;
