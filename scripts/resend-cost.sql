-- What one AdminService.ResendOutbox call (msgxctl outbox resend) costs on
-- a month of delivered outbox rows (docs/performance.md, "Re-sending a
-- lost window"): 3,000,000 rows over flight-state, msg and schd, one every
-- 0.864 s, then the call's statements for a window of the last 30,000
-- rows' time, 10,000 of them msg (one call's worth, MaxResendRows), in a
-- transaction that is rolled back. Run it on an empty database migrated
-- to the current schema:
--
--   createdb -h 127.0.0.1 -U postgres msgx_resendcost
--   go run ./services/cmd/msgx -target=migrate -postgres.url='postgres://postgres@127.0.0.1:5432/msgx_resendcost?sslmode=disable'
--   psql 'postgres://postgres@127.0.0.1:5432/msgx_resendcost?sslmode=disable' -f scripts/resend-cost.sql
--   dropdb -h 127.0.0.1 -U postgres msgx_resendcost
\timing on
INSERT INTO outbox (target, pkey, payload, msg_id, state, attempts, next_attempt_at, created_at, sent_at)
SELECT (ARRAY['flight-state','msg','schd'])[1 + i % 3], (i % 3000)::text, convert_to(repeat('x', 300), 'UTF8'), i / 3, 'SENT', 1,
       now(), now() - interval '30 days' + i * interval '864 ms', now() - interval '30 days' + i * interval '864 ms'
FROM generate_series(1, 3000000) AS i;
VACUUM ANALYZE outbox;
BEGIN;
CREATE TEMP TABLE w AS SELECT id FROM outbox WHERE target = 'msg' AND state = 'SENT'
  AND sent_at >= now() - interval '30 days' + 2970000 * interval '864 ms' AND sent_at < now() + interval '1 day' ORDER BY id LIMIT 10001 FOR UPDATE;
SELECT count(*) FROM w;
UPDATE outbox SET state = 'PENDING', attempts = 0, next_attempt_at = now(), outcome = NULL, sent_at = NULL WHERE id IN (SELECT id FROM w) AND state = 'SENT';
INSERT INTO outbox_requeue_audit (at, action, operator, reason, outbox_ids, target, sent_since, sent_until) SELECT now(), 'resend', 'bench', 'cost', array_agg(id), 'msg', now(), now() FROM w;
ROLLBACK;
