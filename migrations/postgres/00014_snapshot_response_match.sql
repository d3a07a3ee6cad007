-- +goose Up
-- The RQFD request an SCHD RESP answers is matched once, by the step that
-- writes the package's first batch, and stored with the package's progress
-- (R-C6, R-C7): the later batches continue under that match instead of
-- matching again, so a request closed or expired between batches (a newer
-- request superseding it, the timeout, an operator) never turns a package
-- that is half written into SKIPPED. The match is kept across runs of the
-- message (an operator replay): it belongs to the message, not to one run.
-- Both columns are NULL for a DNLD, which answers no request. No foreign
-- key: closed requests are purged after request.retention while a package
-- that went DEAD mid-way may still be replayed later.
ALTER TABLE snapshot_progress
    ADD COLUMN request_id bigint,
    ADD COLUMN match_kind text CHECK (match_kind IN ('exact', 'fallback')),
    ADD CONSTRAINT snapshot_progress_match_chk CHECK ((request_id IS NULL) = (match_kind IS NULL));

-- +goose Down
ALTER TABLE snapshot_progress
    DROP CONSTRAINT snapshot_progress_match_chk,
    DROP COLUMN match_kind,
    DROP COLUMN request_id;
