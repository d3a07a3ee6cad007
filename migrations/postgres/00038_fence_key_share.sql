-- +goose Up
-- msgx_fence locks the lease row FOR KEY SHARE instead of FOR SHARE.
--
-- The fence runs right before COMMIT and holds its lock until the commit
-- ends, flush included. FOR SHARE conflicts with every UPDATE of the row,
-- so the holder's own renewal (an UPDATE of renewed_at and expires_at)
-- waited for each fenced commit in flight, and every fence asked for
-- after that renewal queued behind it: one slow commit anywhere (a commit
-- of the daily job, a flush the disk delayed) held up the commits of every
-- other loop for as long (R-M5, R-M2; docs/performance.md "A quiet Xeon").
--
-- FOR KEY SHARE conflicts only with FOR UPDATE and with an UPDATE of a
-- key column. A renewal, a release and a force-release change no key
-- column (name is the only one), so they no longer wait for fenced
-- commits, and fences no longer queue behind them. What the fence must
-- still keep out is a new term beginning between its check and its
-- commit: every acquisition first locks the row FOR UPDATE (the control
-- plane's lockRow, in the same transaction as the acquiring statement),
-- which conflicts with FOR KEY SHARE, and PostgreSQL carries a key-share
-- lock over to the row version a non-key UPDATE creates, so a renewal
-- between the fence and the acquisition does not let the acquisition
-- through either (TestFence_R_B8_R_M5_RenewalDoesNotWaitButATakeoverDoes).
-- A released or expired term is refused by the next fence as before.
--
-- The function is rewritten from its own definition (pg_get_functiondef),
-- with its lock clause the only change: the definition carries what
-- deploy/grants/postgres.sql set on the function (SECURITY DEFINER and its
-- search_path), which a CREATE OR REPLACE written out here would reset, so
-- a migration never undoes the grants. The previous release's binaries
-- call the same function with the same arguments and errors (R-M4).
-- +goose StatementBegin
DO $$
DECLARE
    def text := pg_get_functiondef('msgx_fence(text, bigint)'::regprocedure);
BEGIN
    IF strpos(def, 'FOR SHARE;') = 0 THEN
        RAISE EXCEPTION 'msgx_fence does not lock FOR SHARE as migration 00004 wrote it: %', def;
    END IF;
    EXECUTE replace(def, 'FOR SHARE;', 'FOR KEY SHARE;');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    def text := pg_get_functiondef('msgx_fence(text, bigint)'::regprocedure);
BEGIN
    IF strpos(def, 'FOR KEY SHARE;') = 0 THEN
        RAISE EXCEPTION 'msgx_fence does not lock FOR KEY SHARE as migration 00038 wrote it: %', def;
    END IF;
    EXECUTE replace(def, 'FOR KEY SHARE;', 'FOR SHARE;');
END
$$;
-- +goose StatementEnd
