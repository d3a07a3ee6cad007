-- +goose Up
-- maintenance_request: an operator's request, recorded by the control
-- plane, to run one maintenance job of the processor now or to report what
-- it would do without writing (dry_run) (R-N9). The processor holding its
-- lease takes PENDING requests in ID order from its maintenance loop, runs
-- them with its own configuration and records the outcome on the row
-- (state, result, error; run_id names the maintenance_run row a real run
-- wrote). Who asked and why stay as written: the row is also an audit row.
CREATE TABLE maintenance_request (
    id           bigserial   PRIMARY KEY,
    job          text        NOT NULL CHECK (job IN ('daily', 'cleanup', 'history-sweep', 'history-purge', 'self-check')),
    dry_run      boolean     NOT NULL,
    operator     text        NOT NULL CHECK (btrim(operator) <> ''),
    reason       text        NOT NULL CHECK (btrim(reason) <> ''),
    principal    text,
    peer         text,
    requested_at timestamptz NOT NULL,
    state        text        NOT NULL DEFAULT 'PENDING' CHECK (state IN ('PENDING', 'DONE', 'FAILED')),
    started_at   timestamptz,
    finished_at  timestamptz,
    run_id       bigint,
    result       jsonb,
    error        text,
    CONSTRAINT maintenance_request_done_chk CHECK ((state = 'PENDING') = (finished_at IS NULL))
);
CREATE INDEX maintenance_request_pending_idx ON maintenance_request (id) WHERE state = 'PENDING';

-- maintenance_run.job is what the run did: the scheduled daily run, or the
-- one job an operator's request asked for (request_id).
ALTER TABLE maintenance_run
    ADD COLUMN job text NOT NULL DEFAULT 'daily' CHECK (job IN ('daily', 'cleanup', 'history-sweep', 'history-purge')),
    ADD COLUMN request_id bigint;

-- +goose Down
ALTER TABLE maintenance_run DROP COLUMN request_id, DROP COLUMN job;
DROP TABLE maintenance_request;
