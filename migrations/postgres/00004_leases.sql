-- +goose Up
-- lease: the single-active leases with fencing tokens (R-B8, R-F1 "Lease",
-- PRE-5). One row per lease name (processor, ingest-scanner,
-- dispatcher/<target>); rows are never deleted, a free lease is one whose
-- expires_at has passed. Every time is PostgreSQL's clock_timestamp(), the
-- one clock all instances share.
--
-- token is the fencing token: a new term (an acquisition of a lease that was
-- not live in the acquirer's hands — free, expired, released or
-- force-released) gets a token larger than every token ever granted for the
-- name; re-acquiring or renewing a live lease keeps it. Fenced writes carry
-- the token and are checked by msgx_fence.
CREATE TABLE lease (
    name        text        PRIMARY KEY CHECK (name <> ''),
    holder      text        NOT NULL CHECK (holder <> ''),
    token       bigint      NOT NULL CHECK (token > 0),
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    -- released_at is set when the holder released the lease or an operator
    -- force-released it (expires_at is set to the same moment), NULL while
    -- the term runs or ran out by expiry.
    released_at timestamptz
);

-- lease_audit: every change of a lease's term (R-F1 "force-release with
-- audit"): acquire (a new term, with its token), renew-lost (a holder's
-- renewal was refused: its term had ended), release (by the holder),
-- force-release (by an operator, with operator and reason), expire (a term
-- that ran out without a release, recorded when the next term begins).
-- The largest token recorded here for a name also keeps tokens from ever
-- being reused should a lease row be deleted by hand.
CREATE TABLE lease_audit (
    id       bigserial   PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    name     text        NOT NULL,
    action   text        NOT NULL CHECK (action IN ('acquire', 'renew-lost', 'release', 'force-release', 'expire')),
    holder   text        NOT NULL,
    token    bigint      NOT NULL,
    operator text,
    reason   text
);
CREATE INDEX lease_audit_name_token_idx ON lease_audit (name, token);

-- msgx_fence(name, token) is the fencing check. A fenced transaction calls
-- it as its LAST statement before COMMIT. It locks the lease row FOR SHARE,
-- so a takeover (whose UPDATE of the row needs a conflicting lock) cannot
-- commit between this check and the caller's COMMIT, and raises SQLSTATE
-- MX001 ("msgx: fenced") unless the lease exists, token is its current
-- token and it has not expired. Raising aborts the caller's transaction:
-- nothing it wrote becomes visible.
-- +goose StatementBegin
CREATE FUNCTION msgx_fence(p_name text, p_token bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    l lease%ROWTYPE;
BEGIN
    SELECT * INTO l FROM lease WHERE name = p_name FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'MX001',
            MESSAGE = format('fenced: no lease named %L', p_name),
            HINT = 'acquire the lease through the control plane before writing';
    END IF;
    IF l.token <> p_token THEN
        RAISE EXCEPTION USING ERRCODE = 'MX001',
            MESSAGE = format('fenced: lease %L token %s is stale; the current token is %s (holder %s)', p_name, p_token, l.token, l.holder),
            HINT = 'another instance took the lease over; stop writing and return to standby';
    END IF;
    IF l.expires_at <= clock_timestamp() THEN
        RAISE EXCEPTION USING ERRCODE = 'MX001',
            MESSAGE = format('fenced: lease %L token %s expired at %s', p_name, p_token, l.expires_at),
            HINT = 'the lease was not renewed in time or was released; stop writing and return to standby';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION msgx_fence(text, bigint);
DROP TABLE lease_audit;
DROP TABLE lease;
