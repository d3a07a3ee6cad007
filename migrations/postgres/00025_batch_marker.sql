-- +goose Up
-- executing_through: on the head a batch execution marked, the last msg_id
-- of that batch (R-H1, R-J1). The executor marks a batch of consecutive
-- open messages on its first message only — executing_by names the
-- instance, executing_through where the batch ends — instead of writing a
-- row version of every message of the batch before it runs. A head found
-- carrying another instance's marker with executing_through above its own
-- msg_id was part of a batch whose process ended: which of its messages
-- ended it is unknown, so none is charged and the messages up to
-- executing_through run one at a time. NULL for a single message's marker
-- and when no marker is set. Adding a nullable column without a default
-- rewrites nothing.
ALTER TABLE proc_state ADD COLUMN IF NOT EXISTS executing_through bigint;

-- +goose Down
ALTER TABLE proc_state DROP COLUMN IF EXISTS executing_through;
