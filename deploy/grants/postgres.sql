-- Least-privilege roles of msgexchange on its PostgreSQL database (R-H11).
--
-- Roles:
--   the owner (e.g. msgx_owner) owns the database, the schema's tables,
--     sequences and functions; it runs the migrations (msgx -target=migrate)
--     and this file, right after them, every time: a migration that adds a
--     table gets its grants here, and the REVOKE below takes back whatever
--     a release no longer needs. No service runs as the owner.
--   msgx_processor, msgx_dispatcher, msgx_projector, msgx_control: the
--     runtime roles, one per target, each with only the statements its code
--     issues (listed beside each grant). They own nothing, cannot create
--     anything, and cannot change the schema.
-- Ingest does not connect to PostgreSQL.
--
-- The runtime roles are created first, with a password kept in the
-- Secret the service mounts (postgres.url) or for certificate
-- authentication, for example:
--
--   CREATE ROLE msgx_processor LOGIN PASSWORD '<password>';
--   CREATE ROLE msgx_dispatcher LOGIN PASSWORD '<password>';
--   CREATE ROLE msgx_projector LOGIN PASSWORD '<password>';
--   CREATE ROLE msgx_control LOGIN PASSWORD '<password>';
--
-- The all-in-one pod (the chart's AllInOne mode) runs every target but
-- migrate in one process on one pool, so it connects as a fifth role that
-- holds nothing of its own and is a member of the four, which gives it
-- their union and no more; created, by whoever creates the roles (a
-- member grant needs ADMIN on the roles), after them:
--
--   CREATE ROLE msgx_all_in_one LOGIN PASSWORD '<password>'
--       IN ROLE msgx_processor, msgx_dispatcher, msgx_projector, msgx_control;
--
-- A site with other role names replaces these four words throughout
-- before running the file, as the owner, on the msgexchange database with
-- the search_path the migrations used:
--
--   psql "$OWNER_URL" -v ON_ERROR_STOP=1 -f deploy/grants/postgres.sql

BEGIN;

-- The database: only the runtime roles (and the owner) connect; nobody but
-- the owner creates temporary tables, which could shadow a table for a
-- function that searches pg_temp.
DO $$
BEGIN
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO CURRENT_USER', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO msgx_processor, msgx_dispatcher, msgx_projector, msgx_control',
                   current_database());
END
$$;

-- The schema: nobody but its owner creates objects in it (the default
-- from PostgreSQL 15 on, stated for older servers).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO msgx_processor, msgx_dispatcher, msgx_projector, msgx_control;

-- Start from nothing, so that running this file again converges on exactly
-- what follows.
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM msgx_processor, msgx_dispatcher, msgx_projector, msgx_control;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM msgx_processor, msgx_dispatcher, msgx_projector, msgx_control;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC, msgx_processor, msgx_dispatcher, msgx_projector, msgx_control;

-- The fencing check msgx_fence(name, token) locks the lease row FOR KEY SHARE,
-- which PostgreSQL allows only to a role that may UPDATE the table. Run by
-- the owner instead (SECURITY DEFINER), the fenced writers need no
-- privilege on lease at all and cannot move a lease; the search_path is
-- pinned to the function's schema, pg_temp last, so no caller's object can
-- stand in for lease.
DO $$
DECLARE
    s text;
BEGIN
    SELECT n.nspname INTO STRICT s
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE p.proname = 'msgx_fence';
    EXECUTE format('ALTER FUNCTION %I.msgx_fence(text, bigint) SECURITY DEFINER SET search_path = %I, pg_temp', s, s);
END
$$;

-- ---------------------------------------------------------------------
-- msgx_processor: the inbox consumer, the executor, the acknowledgements,
-- replays, request matching and the maintenance sweeps
-- (services/processor/internal/pipeline).
GRANT SELECT, INSERT, UPDATE         ON consumer_offset    TO msgx_processor; -- offsets, upserted
GRANT SELECT, INSERT, UPDATE, DELETE ON proc_state         TO msgx_processor; -- message states; history sweep deletes
GRANT SELECT, INSERT, UPDATE, DELETE ON flight             TO msgx_processor; -- flight state; archived flights deleted
GRANT SELECT, INSERT, DELETE         ON flight_history     TO msgx_processor; -- archive of swept flights; a swept FLID's versions continue from it (R-L1); purged after history.keep
GRANT SELECT, INSERT, DELETE         ON outbox             TO msgx_processor; -- intents; replay and sweep delete
GRANT SELECT, INSERT, UPDATE, DELETE ON projection_pending TO msgx_processor;
GRANT SELECT, INSERT, UPDATE, DELETE ON snapshot_progress  TO msgx_processor;
GRANT SELECT, INSERT, DELETE         ON snapshot_log       TO msgx_processor; -- written by a package's last step, purged after 90 days
GRANT SELECT, INSERT, UPDATE, DELETE ON ref_data           TO msgx_processor;
GRANT SELECT, INSERT, UPDATE         ON season_schedule    TO msgx_processor;
GRANT SELECT, INSERT, DELETE         ON season_flight      TO msgx_processor;
GRANT SELECT, UPDATE, DELETE         ON req_track          TO msgx_processor; -- answers matched, timeouts, purge
GRANT SELECT                         ON replay_request     TO msgx_processor; -- applies the control plane's requests,
GRANT UPDATE (state, applied_at, replayed, refused, refused_ids)
                                     ON replay_request     TO msgx_processor; -- recording only the outcome: the audit
                                                                              -- fields (who, why, what) stay as written (R-K7)
GRANT INSERT                         ON replay_audit       TO msgx_processor;
GRANT SELECT, INSERT, UPDATE         ON maintenance_run    TO msgx_processor;
GRANT SELECT                         ON maintenance_request TO msgx_processor; -- runs the control plane's maintenance requests,
GRANT UPDATE (state, started_at, finished_at, run_id, result, error)
                                     ON maintenance_request TO msgx_processor; -- recording only the outcome (R-N9)
GRANT SELECT, INSERT, UPDATE         ON mailbox_reuse      TO msgx_processor; -- reused mailbox IDs held (R-L5)
GRANT SELECT, INSERT, UPDATE         ON shadow_cleanup     TO msgx_processor; -- IDs of cleaned shadowed records, never executed again (R-L6)
GRANT USAGE ON SEQUENCE outbox_id_seq, replay_audit_id_seq, maintenance_run_id_seq, season_schedule_id_seq,
    snapshot_log_id_seq TO msgx_processor;
GRANT EXECUTE ON FUNCTION msgx_fence(text, bigint) TO msgx_processor;
GRANT EXECUTE ON FUNCTION msgx_check(boolean, text) TO msgx_processor; -- asserts a batch's writes before the COMMIT sent with them

-- ---------------------------------------------------------------------
-- msgx_dispatcher: relays outbox rows (services/dispatcher/internal/relay).
-- It reads the rows and their requests and changes only delivery columns:
-- never a payload, a message state or a request's content.
GRANT SELECT ON outbox TO msgx_dispatcher;
GRANT UPDATE (state, outcome, attempts, last_error, next_attempt_at, sent_at, retry) ON outbox TO msgx_dispatcher;
GRANT SELECT (msg_id, received_at) ON proc_state TO msgx_dispatcher; -- received_at: the row a marker is written onto is the row the message was read from
GRANT UPDATE (backfilled_at, backfill_outcome) ON proc_state TO msgx_dispatcher; -- backfill finished
GRANT SELECT (id, type, state, registered_at) ON req_track TO msgx_dispatcher;
GRANT UPDATE (state, sent_at, outbound_id, closed_at, closed_reason) ON req_track TO msgx_dispatcher;
GRANT EXECUTE ON FUNCTION msgx_fence(text, bigint) TO msgx_dispatcher;
GRANT SELECT ON mailbox_census TO msgx_dispatcher; -- answers the control plane's mailbox census,
GRANT UPDATE (state, started_at, finished_at, next_id, rows_from_start, after_last_marked,
              unmarked_from_start, unmarked_below_start, error)
    ON mailbox_census TO msgx_dispatcher; -- recording only the figures (R-L6, R-N9)

-- ---------------------------------------------------------------------
-- msgx_projector: reads flight to rebuild and check the Redis projection
-- (services/projector/internal/pgsource); it writes nothing.
GRANT SELECT ON flight TO msgx_projector;

-- ---------------------------------------------------------------------
-- msgx_control: the control plane (services/control): the lease authority,
-- operator reads, replay and rebuild requests, ending a message, requeueing
-- outbox rows, outbound requests, and their audit rows. Audit tables are
-- append-only for it: INSERT and SELECT, never UPDATE or DELETE.
GRANT SELECT, INSERT, UPDATE ON lease                TO msgx_control;
GRANT SELECT, INSERT         ON lease_audit          TO msgx_control;
GRANT SELECT                 ON proc_state           TO msgx_control;
GRANT UPDATE (state, error_class, reason, finished_at, updated_at, next_attempt_at, backfilled_at, backfill_outcome)
                             ON proc_state           TO msgx_control; -- end a message, finish or reopen a backfill;
                                                                      -- never the raw message or its identity (R-K7)
GRANT SELECT, INSERT         ON outbox               TO msgx_control; -- backfill, rebuild, requests
GRANT UPDATE (state, attempts, next_attempt_at, outcome, sent_at)
                             ON outbox               TO msgx_control; -- requeue, discard: delivery columns only,
                                                                      -- never a payload or its key (R-K7)
GRANT SELECT, DELETE         ON snapshot_progress    TO msgx_control; -- an ended snapshot's progress
GRANT SELECT, DELETE         ON projection_pending   TO msgx_control; -- a discarded flight-state row releases its message's wait (R-L2)
GRANT SELECT                 ON flight               TO msgx_control;
GRANT SELECT                 ON flight_history       TO msgx_control; -- a flight's archived versions (R-N9)
GRANT SELECT, INSERT, UPDATE ON req_track            TO msgx_control;
GRANT SELECT, INSERT         ON replay_request       TO msgx_control;
GRANT SELECT                 ON replay_audit         TO msgx_control;
GRANT SELECT                 ON mailbox_reuse        TO msgx_control; -- listing reused mailbox IDs (R-L5)
GRANT SELECT                 ON ref_data             TO msgx_control; -- operator reads without SQL (R-N9)
GRANT SELECT                 ON season_schedule      TO msgx_control;
GRANT SELECT                 ON season_flight        TO msgx_control;
GRANT SELECT                 ON snapshot_log         TO msgx_control; -- the snapshot log (R-L7)
GRANT SELECT                 ON maintenance_run      TO msgx_control;
GRANT SELECT, INSERT         ON maintenance_request  TO msgx_control; -- trigger or dry-run a maintenance job (R-N9)
GRANT SELECT, INSERT         ON mailbox_census       TO msgx_control; -- the cutover's mailbox figures (R-L6, R-N9)
GRANT SELECT                 ON goose_db_version     TO msgx_control; -- msgxctl database status: the migration state (R-N9)
GRANT pg_read_all_stats                              TO msgx_control; -- and the long transactions of every role's sessions
GRANT SELECT, INSERT         ON projection_rebuild   TO msgx_control;
GRANT SELECT, INSERT         ON message_end_audit    TO msgx_control;
GRANT SELECT, INSERT         ON outbox_requeue_audit TO msgx_control;
GRANT SELECT, INSERT         ON outbox_discard_audit TO msgx_control;
GRANT USAGE ON SEQUENCE lease_audit_id_seq, outbox_id_seq, req_track_id_seq, req_track_seqn,
    replay_request_id_seq, projection_rebuild_id_seq, message_end_audit_id_seq, outbox_requeue_audit_id_seq,
    outbox_discard_audit_id_seq, maintenance_request_id_seq, mailbox_census_id_seq
    TO msgx_control;

COMMIT;
