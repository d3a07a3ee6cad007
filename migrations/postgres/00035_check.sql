-- +goose Up
-- msgx_check(ok, what) is the assertion of a statement whose transaction
-- commits in the same round trip as it (libs/lease SendAtCommit): it
-- returns true when ok is true and otherwise raises SQLSTATE MX002
-- ("msgx: check") with the message what. A condition the commit depends
-- on — every message of a batch still open, the claim of a head taken —
-- can then no longer be checked by the client between the statement and
-- COMMIT; raised inside the statement, it aborts the transaction and
-- PostgreSQL skips the COMMIT sent behind it: nothing is committed. The
-- previous release neither calls nor needs it (additive, R-M4).
-- +goose StatementBegin
CREATE FUNCTION msgx_check(ok boolean, what text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION USING ERRCODE = 'MX002', MESSAGE = what;
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION msgx_check(boolean, text);
