-- +goose Up
-- backfill_outcome 'shadowed' (R-L6): in shadow mode the dispatcher settles
-- each marker intent without writing the marker, and finishes the backfill
-- with this outcome, so shadow mode piles up no pending intent, the
-- unmarked-backlog gauges and the self-check stop counting the message and
-- the record cleanup deletes it at its retention like any other. A
-- republish of the still unmarked mailbox row outside shadow mode opens
-- the backfill again (the row is the gateway's from ingest.mailbox.start-id
-- on). A wider check: the previous release's code writes none of the new
-- value and reads the column only to show it; NOT VALID, as in 00016.
ALTER TABLE proc_state DROP CONSTRAINT proc_state_backfill_outcome_check;
ALTER TABLE proc_state ADD CONSTRAINT proc_state_backfill_outcome_check
    CHECK (backfill_outcome IN ('written', 'already-marked', 'abandoned', 'discarded', 'shadowed')) NOT VALID;

-- +goose Down
UPDATE proc_state SET backfill_outcome = NULL WHERE backfill_outcome = 'shadowed';
ALTER TABLE proc_state DROP CONSTRAINT proc_state_backfill_outcome_check;
ALTER TABLE proc_state ADD CONSTRAINT proc_state_backfill_outcome_check
    CHECK (backfill_outcome IN ('written', 'already-marked', 'abandoned', 'discarded')) NOT VALID;
