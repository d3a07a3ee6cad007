package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exec runs one statement on the bundle's database.
func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

// TestMsgxctl_R_N9_ArchivedReferenceSeason: "flight archived", "reference
// list" and "season list|get" answer without SQL, as tables and as JSON
// with documents as objects, paged.
func TestMsgxctl_R_N9_ArchivedReferenceSeason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO flight_history (flid, state_version, operation_day, state, last_msg_id, doc, created_at, updated_at, archived_at)
		VALUES (17, 1, '2026-01-01', 'ACTIVE', 7, '{"FLNO":"CA1"}', $1, $1, $2), (17, 2, '2026-01-01', 'DELETED', 8, '{"FLNO":"CA1"}', $1, $1, $2)`,
		testNow.Add(-48*time.Hour), testNow.Add(-time.Hour))
	b.exec(t, `INSERT INTO ref_data (type, key, doc, last_msg_id, updated_at) VALUES
		('APOT', 'PEK', '{"APC3":"PEK"}', 11, $1), ('APOT', 'SHA', '{"APC3":"SHA"}', 12, $1), ('ALCD', 'CA', '{"ALC2":"CA"}', 13, $1)`, testNow)
	b.exec(t, `INSERT INTO season_schedule (id, snam, apcd, sdat, edat, start_date, end_date, flights, last_msg_id, updated_at)
		VALUES (4, 'S26', 'PEK', '29MAR26', '24OCT26', '2026-03-29', '2026-10-24', 2, 6, $1)`, testNow)
	b.exec(t, `INSERT INTO season_flight (season_id, seq, alcd, flno, mvin, doc) VALUES (4, 1, 'CA', 'CA1234', 'D', '{"FLNO":"CA1234"}'),
		(4, 2, 'MU', 'MU5100', 'A', '{"FLNO":"MU5100"}')`)

	r := b.run(t, "flight", "archived", "17", "--limit", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^version\s+2$`, r.stdout)
	require.Regexp(t, `(?m)^state\s+DELETED$`, r.stdout)
	require.Contains(t, r.stdout, `"FLNO": "CA1"`)
	require.Contains(t, r.stdout, "more: repeat with --before 2")
	r = b.run(t, "flight", "archived", "17", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	versions := decodeJSON(t, r.stdout)["versions"].([]any)
	require.Len(t, versions, 2)
	require.Equal(t, map[string]any{"FLNO": "CA1"}, versions[0].(map[string]any)["doc_json"])
	r = b.run(t, "flight", "archived", "15")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found: flight 15 has no archived version")

	r = b.run(t, "reference", "list", "--limit", "2")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "TYPE", "KEY", "LAST_MSG_ID", "UPDATED_AT", "DOC")
	requireLine(t, r.stdout, "ALCD", "CA", "13", local(testNow), `{"ALC2":`, `"CA"}`)
	require.Contains(t, r.stdout, "more: repeat with --after APOT/PEK")
	require.Contains(t, r.stdout, "rows per type: ALCD 1, APOT 2")
	r = b.run(t, "ref", "list", "APOT", "SHA")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^last_msg_id\s+12$`, r.stdout)
	r = b.run(t, "reference", "list", "APOT", "--after", "APOT/PEK", "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "APC3: SHA")
	require.NotContains(t, r.stdout, "APC3: PEK")

	r = b.run(t, "season", "list")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "4", "S26", "PEK", "29MAR26", "24OCT26", "2026-03-29", "2026-10-24", "2", "6", local(testNow))
	r = b.run(t, "season", "get", "4", "--limit", "1")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "1", "CA", "CA1234", "D", `{"FLNO":`, `"CA1234"}`)
	require.Contains(t, r.stdout, "more: repeat with --after 1")
	r = b.run(t, "season", "get", "4", "--after", "1", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	flights := decodeJSON(t, r.stdout)["flights"].([]any)
	require.Len(t, flights, 1)
	require.Equal(t, float64(2), flights[0].(map[string]any)["seq"])
}

// TestMsgxctl_R_L7_R_L5_SnapshotLogAndReusedIDs: "snapshot log" lists the
// snapshot log (SCHD_SNAP_LOG) and "mailbox reused" the reused mailbox
// IDs with both texts on request.
func TestMsgxctl_R_L7_R_L5_SnapshotLogAndReusedIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO snapshot_log (id, msg_id, styp, days, records, changed, deleted, unchanged, batches, started_at, finished_at, outcome)
		VALUES (1, 70, 'DNLD', '{2026-03-01,2026-03-02}', 120, 10, 2, 108, 3, $1, $2, 'SUCCEEDED')`, testNow.Add(-90*time.Second), testNow)
	b.exec(t, `INSERT INTO mailbox_reuse (msg_id, text_sha256, first_sha256, raw, first_raw, kafka_offset, detected_at, last_seen_at, seen)
		VALUES (4242, 'bbbbbbbb', 'aaaaaaaa', '<MSG>held</MSG>', '<MSG>ran</MSG>', 7, $1, $2, 3)`, testNow.Add(-time.Hour), testNow)

	r := b.run(t, "snapshot", "log")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "ID", "MSG_ID", "STYP", "DAYS", "RECORDS", "CHANGED", "DELETED", "UNCHANGED", "BATCHES", "FINISHED_AT", "DURATION", "OUTCOME")
	requireLine(t, r.stdout, "1", "70", "DNLD", "2026-03-01,2026-03-02", "120", "10", "2", "108", "3", local(testNow), "1m30s", "SUCCEEDED")
	r = b.run(t, "snapshot", "log", "--msg-id", "70", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	e := decodeJSON(t, r.stdout)["entries"].([]any)[0].(map[string]any)
	require.Equal(t, float64(90000), e["duration_ms"])
	require.Equal(t, []any{"2026-03-01", "2026-03-02"}, e["days"])

	r = b.run(t, "mailbox", "reused")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "4242", "bbbbbbbb", "aaaaaaaa", "-", local(testNow.Add(-time.Hour)), local(testNow), "3")
	require.NotContains(t, r.stdout, "<MSG>held</MSG>")
	r = b.run(t, "mailbox", "reused", "--msg-id", "4242", "--texts")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "text that ran (aaaaaaaa):\n<MSG>ran</MSG>\nheld text (bbbbbbbb):\n<MSG>held</MSG>")
}

// TestMsgxctl_R_N9_AuditReplayListMaintenanceConsistency: "audit list",
// "replay list", "maintenance run|request|runs" and "consistency check"
// answer without SQL; a dry run is recorded for the processor; a check
// that finds something exits 1.
func TestMsgxctl_R_N9_AuditReplayListMaintenanceConsistency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO replay_request (id, msg_ids, selector, operator, reason, requested_at) VALUES (3, '{42}', '{"ids":[42]}', 'alice', 'codec fixed', $1)`, testNow)
	b.exec(t, `INSERT INTO lease_audit (at, name, action, holder, token, operator, reason) VALUES ($1, 'processor', 'force-release', 'pod-a', 3, 'bob', 'pod gone')`,
		testNow.Add(-time.Minute))

	r := b.run(t, "maintenance", "run", "history-sweep", "--dry-run", "--operator", "alice", "--reason", "how many are due")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^job\s+history-sweep$`, r.stdout)
	require.Regexp(t, `(?m)^dry_run\s+true$`, r.stdout)
	require.Regexp(t, `(?m)^state\s+PENDING$`, r.stdout)
	require.Contains(t, r.stdout, "follow it with msgxctl maintenance request 1")
	r = b.run(t, "maintenance", "run", "vacuum", "--operator", "a", "--reason", "r")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `JOB "vacuum": want one of daily, cleanup, history-sweep, history-purge, self-check`)

	// What the processor records once it ran the request.
	b.exec(t, `UPDATE maintenance_request SET state = 'DONE', started_at = $1, finished_at = $1, result = '{"history_sweep":{"archived":3}}'`, testNow)
	b.exec(t, `INSERT INTO maintenance_run (scheduled_for, started_at, finished_at, records_deleted, outbox_deleted, flights_archived, flights_skipped, flights_failed, tombstones)
		VALUES ($1, $1, $2, 5, 7, 3, 0, 0, 1)`, testNow.Add(-time.Hour), testNow.Add(-59*time.Minute))
	b.exec(t, `INSERT INTO maintenance_run (scheduled_for, started_at, job, request_id, flights_archived, flights_skipped, flights_failed, tombstones)
		VALUES ($1, $1, 'history-sweep', 1, 3, 0, 0, 0)`, testNow)
	r = b.run(t, "maintenance", "request", "1", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	v := decodeJSON(t, r.stdout)["request"].(map[string]any)
	require.Equal(t, "MAINTENANCE_REQUEST_STATE_DONE", v["state"])
	require.Equal(t, map[string]any{"history_sweep": map[string]any{"archived": float64(3)}}, v["result_json"])
	r = b.run(t, "maintenance", "runs")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "2", "history-sweep", "1", local(testNow), "-", "-", "-", "3", "0", "0", "0", "-")
	requireLine(t, r.stdout, "1", "daily", "-", local(testNow.Add(-time.Hour)), local(testNow.Add(-59*time.Minute)), "5", "7", "3", "0", "0", "1", "-")

	r = b.run(t, "audit", "list")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "AT", "KIND", "ACTION", "OPERATOR", "PRINCIPAL", "SUBJECT", "REASON", "DETAIL")
	require.Regexp(t, `(?m)^\S+\s+maintenance\s+history-sweep \(dry run\)\s+alice\s+`, r.stdout)
	require.Regexp(t, `(?m)^\S+\s+lease\s+force-release\s+bob\s+-\s+lease processor\s+pod gone\s+`, r.stdout)
	r = b.run(t, "audit", "list", "--kind", "lease", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	entries := decodeJSON(t, r.stdout)["entries"].([]any)
	require.Len(t, entries, 1)
	require.Equal(t, map[string]any{"holder": "pod-a", "token": float64(3)}, entries[0].(map[string]any)["detail_json"])
	r = b.run(t, "audit", "list", "--kind", "everything")
	require.Equal(t, 2, r.code)

	r = b.run(t, "replay", "list", "--state", "pending")
	require.Equal(t, 0, r.code, r.stderr)
	requireLine(t, r.stdout, "3", "PENDING", "1", "0", "0", "alice", "codec", "fixed", local(testNow), "-")

	// The bundle's fixture has a dead-lettered mailbox intent and msg row.
	r = b.run(t, "consistency", "check")
	require.Equal(t, 1, r.code, r.stdout)
	requireLine(t, r.stdout, "outbox-dead", "2", "2,3", `runbook`, `"Dead`, `letters`, `(outbox`, `DLQ)";`, "msgxctl", "outbox", "list", "--state", "dead")
	requireLine(t, r.stdout, "version-regression", "0", "-", "-")
	require.Contains(t, r.stderr, "consistency check found inconsistencies")
	r = b.run(t, "consistency", "check", "-o", "json")
	require.Equal(t, 1, r.code)
	require.Equal(t, false, decodeJSON(t, r.stdout)["ok"])

	r = b.run(t, "database", "status")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^schema version \d+ \(\d+ migrations applied, the last at `, r.stdout)
	requireLine(t, r.stdout, "VERSION", "APPLIED_AT")
	require.Regexp(t, `(?m)^00032\s+\S+$`, r.stdout)
	require.Contains(t, r.stdout, "invalid indexes: none")
	r = b.run(t, "database", "status", "--older-than", "0s")
	require.Equal(t, 2, r.code)
}
