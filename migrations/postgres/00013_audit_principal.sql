-- +goose Up
-- Who made each audited change (R-H9): principal is the name the caller's
-- control-plane credential carries (never the secret), peer the remote
-- address of its connection. The operator and reason columns stay: they
-- are what the caller declared; principal and peer are what the control
-- plane proved and saw, and it writes both with every row. Rows written
-- before this migration, and rows other writers (tests, manual repairs)
-- insert, have neither.
ALTER TABLE lease_audit ADD COLUMN principal text, ADD COLUMN peer text;
-- denied: a lease call refused because the term belongs to another
-- principal (an Acquire, Renew or Release naming a holder whose live term
-- another credential acquired).
ALTER TABLE lease_audit DROP CONSTRAINT lease_audit_action_check;
ALTER TABLE lease_audit ADD CONSTRAINT lease_audit_action_check
    CHECK (action IN ('acquire', 'renew-lost', 'release', 'force-release', 'expire', 'denied'));

-- lease.principal binds a term to the principal that acquired it: only
-- that principal renews or releases it, or gets its token back from an
-- Acquire with the holder's name. NULL for a term begun before this
-- migration; the first renewal binds it.
ALTER TABLE lease ADD COLUMN principal text;

ALTER TABLE outbox_requeue_audit ADD COLUMN principal text, ADD COLUMN peer text;
ALTER TABLE replay_request ADD COLUMN principal text, ADD COLUMN peer text;
ALTER TABLE req_track ADD COLUMN principal text, ADD COLUMN peer text;
ALTER TABLE projection_rebuild ADD COLUMN principal text, ADD COLUMN peer text;
ALTER TABLE message_end_audit ADD COLUMN principal text, ADD COLUMN peer text;

-- +goose Down
ALTER TABLE message_end_audit DROP COLUMN principal, DROP COLUMN peer;
ALTER TABLE projection_rebuild DROP COLUMN principal, DROP COLUMN peer;
ALTER TABLE req_track DROP COLUMN principal, DROP COLUMN peer;
ALTER TABLE replay_request DROP COLUMN principal, DROP COLUMN peer;
ALTER TABLE outbox_requeue_audit DROP COLUMN principal, DROP COLUMN peer;
ALTER TABLE lease DROP COLUMN principal;
DELETE FROM lease_audit WHERE action = 'denied';
ALTER TABLE lease_audit DROP CONSTRAINT lease_audit_action_check;
ALTER TABLE lease_audit ADD CONSTRAINT lease_audit_action_check
    CHECK (action IN ('acquire', 'renew-lost', 'release', 'force-release', 'expire'));
ALTER TABLE lease_audit DROP COLUMN principal, DROP COLUMN peer;
