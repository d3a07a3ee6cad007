package control_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestInspect_R_N9_ArchivedFlight: an archived flight's versions come with
// their documents, newest first, paged; a FLID with none is NOT_FOUND;
// role read suffices, a service credential and no token are refused.
func TestInspect_R_N9_ArchivedFlight(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	for v := 1; v <= 3; v++ {
		b.exec(t, `INSERT INTO flight_history (flid, state_version, operation_day, state, master_flid, last_msg_id, doc, created_at, updated_at, archived_at)
			VALUES (17, $1::int, '2026-01-01', CASE WHEN $1::int = 3 THEN 'DELETED' ELSE 'ACTIVE' END, CASE WHEN $1::int = 2 THEN 9 END, 40 + $1::int,
				jsonb_build_object('FLNO', 'CA1234', 'V', $1::int), $2, $3, $4)`,
			v, testNow.Add(-90*24*time.Hour), testNow.Add(-time.Duration(40-v)*24*time.Hour), testNow.Add(-24*time.Hour))
	}
	client := controlv1.NewInspectServiceClient(b.conn)

	resp, err := client.GetArchivedFlight(as(t, "viewer"), &controlv1.GetArchivedFlightRequest{Flid: 17, Limit: 2})
	require.NoError(t, err)
	require.False(t, resp.GetLive())
	require.Len(t, resp.GetVersions(), 2)
	require.Equal(t, int64(2), resp.GetNextBeforeVersion())
	top := resp.GetVersions()[0]
	requireProtoEqual(t, &controlv1.ArchivedFlight{
		Version: &controlv1.ArchivedFlightVersion{StateVersion: 3, State: controlv1.FlightState_FLIGHT_STATE_DELETED, OperationDay: "2026-01-01",
			LastMsgId: 43, UpdatedAt: timestamppb.New(testNow.Add(-37 * 24 * time.Hour)), ArchivedAt: timestamppb.New(testNow.Add(-24 * time.Hour))},
		CreatedAt: timestamppb.New(testNow.Add(-90 * 24 * time.Hour)),
		DocJson:   top.GetDocJson(),
	}, top)
	require.JSONEq(t, `{"FLNO":"CA1234","V":3}`, top.GetDocJson())
	require.Equal(t, int64(9), resp.GetVersions()[1].GetMasterFlid())

	page, err := client.GetArchivedFlight(as(t, "viewer"), &controlv1.GetArchivedFlightRequest{Flid: 17, Limit: 2, BeforeVersion: 2})
	require.NoError(t, err)
	require.Len(t, page.GetVersions(), 1)
	require.Equal(t, int64(1), page.GetVersions()[0].GetVersion().GetStateVersion())
	require.Zero(t, page.GetNextBeforeVersion())

	b.exec(t, `INSERT INTO flight (flid, operation_day, state, state_version, last_msg_id, doc) VALUES (17, '2026-01-01', 'ACTIVE', 4, 50, '{}')`)
	resp, err = client.GetArchivedFlight(as(t, "viewer"), &controlv1.GetArchivedFlightRequest{Flid: 17})
	require.NoError(t, err)
	require.True(t, resp.GetLive(), "sent again after the sweep (R-L1)")
	require.Len(t, resp.GetVersions(), 3)

	_, err = client.GetArchivedFlight(as(t, "viewer"), &controlv1.GetArchivedFlightRequest{Flid: 18})
	requireCode(t, codes.NotFound, err)
	_, err = client.GetArchivedFlight(as(t, "viewer"), &controlv1.GetArchivedFlightRequest{Flid: 0})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.GetArchivedFlight(as(t, "viewer"), &controlv1.GetArchivedFlightRequest{Flid: 17, Limit: -1})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.GetArchivedFlight(as(t, "processor"), &controlv1.GetArchivedFlightRequest{Flid: 17})
	requireCode(t, codes.PermissionDenied, err)
	_, err = client.GetArchivedFlight(plainCtx(t), &controlv1.GetArchivedFlightRequest{Flid: 17})
	requireCode(t, codes.Unauthenticated, err)
}

// TestInspect_R_N9_ReferenceData: reference data by type, by type and key,
// by key prefix, paged in (type, key) order, with the row count of every
// type; a key without its type is refused.
func TestInspect_R_N9_ReferenceData(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	b.exec(t, `INSERT INTO ref_data (type, key, doc, last_msg_id, updated_at) VALUES
		('APOT', 'PEK', '{"APC3":"PEK","APFN":"Beijing Capital"}', 11, $1),
		('APOT', 'PKX', '{"APC3":"PKX"}', 12, $1),
		('APOT', 'SHA', '{"APC3":"SHA"}', 13, $1),
		('ALCD', 'CA', '{"ALC2":"CA"}', 14, $1)`, testNow)
	client := controlv1.NewInspectServiceClient(b.conn)

	all, err := client.ListReferenceData(as(t, "viewer"), &controlv1.ListReferenceDataRequest{})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"APOT": 3, "ALCD": 1}, all.GetTypes())
	var keys []string
	for _, d := range all.GetItems() {
		keys = append(keys, d.GetType()+"/"+d.GetKey())
	}
	require.Equal(t, []string{"ALCD/CA", "APOT/PEK", "APOT/PKX", "APOT/SHA"}, keys)
	require.Empty(t, all.GetNextAfterType())

	one, err := client.ListReferenceData(as(t, "viewer"), &controlv1.ListReferenceDataRequest{Type: "APOT", Key: "PEK"})
	require.NoError(t, err)
	require.Len(t, one.GetItems(), 1)
	require.JSONEq(t, `{"APC3":"PEK","APFN":"Beijing Capital"}`, one.GetItems()[0].GetDocJson())
	require.Equal(t, int64(11), one.GetItems()[0].GetLastMsgId())
	require.True(t, testNow.Equal(one.GetItems()[0].GetUpdatedAt().AsTime()))

	page, err := client.ListReferenceData(as(t, "viewer"), &controlv1.ListReferenceDataRequest{Type: "APOT", KeyPrefix: "P", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, "PEK", page.GetItems()[0].GetKey())
	require.Equal(t, []string{"APOT", "PEK"}, []string{page.GetNextAfterType(), page.GetNextAfterKey()})
	page, err = client.ListReferenceData(as(t, "viewer"), &controlv1.ListReferenceDataRequest{Type: "APOT", KeyPrefix: "P", Limit: 1,
		AfterType: page.GetNextAfterType(), AfterKey: page.GetNextAfterKey()})
	require.NoError(t, err)
	require.Equal(t, "PKX", page.GetItems()[0].GetKey())
	require.Empty(t, page.GetNextAfterKey(), "SHA does not start with P")

	_, err = client.ListReferenceData(as(t, "viewer"), &controlv1.ListReferenceDataRequest{Key: "PEK"})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.ListReferenceData(as(t, "processor"), &controlv1.ListReferenceDataRequest{})
	requireCode(t, codes.PermissionDenied, err)
}

// TestInspect_R_N9_SeasonSchedules: season windows newest first, by
// season name, and one window with its flights in sequence order, paged.
func TestInspect_R_N9_SeasonSchedules(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	b.exec(t, `INSERT INTO season_schedule (id, snam, apcd, sdat, edat, start_date, end_date, flights, last_msg_id, updated_at) VALUES
		(1, 'W25', 'PEK', '26OCT25', '28MAR26', '2025-10-26', '2026-03-28', 0, 5, $1),
		(2, 'S26', 'PEK', '29MAR26', '24OCT26', '2026-03-29', '2026-10-24', 3, 6, $1)`, testNow)
	b.exec(t, `INSERT INTO season_flight (season_id, seq, alcd, flno, mvin, doc) VALUES
		(2, 1, 'CA', 'CA1234', 'D', '{"FLNO":"CA1234"}'), (2, 2, 'CA', 'CA1235', 'A', '{"FLNO":"CA1235"}'),
		(2, 3, 'MU', 'MU5100', 'D', '{"FLNO":"MU5100"}')`)
	client := controlv1.NewInspectServiceClient(b.conn)

	list, err := client.ListSeasonSchedules(as(t, "viewer"), &controlv1.ListSeasonSchedulesRequest{Limit: 1})
	require.NoError(t, err)
	requireProtoEqual(t, &controlv1.ListSeasonSchedulesResponse{
		Schedules: []*controlv1.SeasonSchedule{{Id: 2, Snam: "S26", Apcd: "PEK", Sdat: "29MAR26", Edat: "24OCT26",
			StartDate: "2026-03-29", EndDate: "2026-10-24", Flights: 3, LastMsgId: 6, UpdatedAt: timestamppb.New(testNow)}},
		NextBeforeId: 2,
	}, list)
	w25, err := client.ListSeasonSchedules(as(t, "viewer"), &controlv1.ListSeasonSchedulesRequest{Snam: "W25"})
	require.NoError(t, err)
	require.Len(t, w25.GetSchedules(), 1)
	require.Equal(t, int64(1), w25.GetSchedules()[0].GetId())

	got, err := client.GetSeasonSchedule(as(t, "viewer"), &controlv1.GetSeasonScheduleRequest{Id: 2, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, "S26", got.GetSchedule().GetSnam())
	require.Len(t, got.GetFlights(), 2)
	require.Equal(t, "CA1234", got.GetFlights()[0].GetFlno())
	require.JSONEq(t, `{"FLNO":"CA1234"}`, got.GetFlights()[0].GetDocJson())
	require.Equal(t, int32(2), got.GetNextAfterSeq())
	got, err = client.GetSeasonSchedule(as(t, "viewer"), &controlv1.GetSeasonScheduleRequest{Id: 2, AfterSeq: 2})
	require.NoError(t, err)
	require.Len(t, got.GetFlights(), 1)
	require.Equal(t, "MU5100", got.GetFlights()[0].GetFlno())

	_, err = client.GetSeasonSchedule(as(t, "viewer"), &controlv1.GetSeasonScheduleRequest{Id: 9})
	requireCode(t, codes.NotFound, err)
	_, err = client.ListSeasonSchedules(as(t, "processor"), &controlv1.ListSeasonSchedulesRequest{})
	requireCode(t, codes.PermissionDenied, err)
}

// TestInspect_R_L7_SnapshotLog: the snapshot log (SCHD_SNAP_LOG) lists
// each finished package newest first with its days, counts, duration and
// outcome; by message and paged.
func TestInspect_R_L7_SnapshotLog(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	b.exec(t, `INSERT INTO snapshot_log (id, msg_id, styp, days, records, changed, deleted, unchanged, batches, started_at, finished_at, outcome) VALUES
		(1, 70, 'DNLD', '{2026-03-02,2026-03-01}', 120, 10, 2, 108, 3, $1, $2, 'SUCCEEDED'),
		(2, 71, 'RESP', '{2026-03-03}', 5, 5, 0, 0, 1, $1, $1, 'SUCCEEDED'),
		(3, 70, 'DNLD', '{2026-03-01}', 120, 0, 0, 120, 3, $2, $3, 'SUCCEEDED')`,
		testNow.Add(-2*time.Minute), testNow.Add(-time.Minute-500*time.Millisecond), testNow)
	client := controlv1.NewInspectServiceClient(b.conn)

	resp, err := client.ListSnapshotLog(as(t, "viewer"), &controlv1.ListSnapshotLogRequest{MsgId: 70})
	require.NoError(t, err)
	require.Len(t, resp.GetEntries(), 2)
	require.Equal(t, int64(3), resp.GetEntries()[0].GetId(), "a replayed package logs each run, newest first")
	requireProtoEqual(t, &controlv1.SnapshotLogEntry{
		Id: 1, MsgId: 70, Styp: "DNLD", Days: []string{"2026-03-01", "2026-03-02"}, Records: 120, Changed: 10, Deleted: 2,
		Unchanged: 108, Batches: 3, StartedAt: timestamppb.New(testNow.Add(-2 * time.Minute)),
		FinishedAt: timestamppb.New(testNow.Add(-time.Minute - 500*time.Millisecond)), DurationMs: 59500, Outcome: "SUCCEEDED",
	}, resp.GetEntries()[1])

	page, err := client.ListSnapshotLog(as(t, "viewer"), &controlv1.ListSnapshotLogRequest{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, int64(2), page.GetNextBeforeId())
	page, err = client.ListSnapshotLog(as(t, "viewer"), &controlv1.ListSnapshotLogRequest{Limit: 2, BeforeId: 2})
	require.NoError(t, err)
	require.Len(t, page.GetEntries(), 1)
	require.Zero(t, page.GetNextBeforeId())
	_, err = client.ListSnapshotLog(as(t, "processor"), &controlv1.ListSnapshotLogRequest{})
	requireCode(t, codes.PermissionDenied, err)
}

// TestInspect_R_L5_MailboxReuse: the reused mailbox IDs are listed newest
// detection first with both hashes, and both texts on request; by ID and
// paged by token; a foreign token is refused.
func TestInspect_R_L5_MailboxReuse(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	b.exec(t, `INSERT INTO mailbox_reuse (msg_id, text_sha256, first_sha256, raw, first_raw, received_at, kafka_offset, detected_at, last_seen_at, seen) VALUES
		(4242, 'bbbb', 'aaaa', '<MSG>second</MSG>', '<MSG>first</MSG>', $1, 7, $2, $3, 3),
		(4242, 'cccc', 'aaaa', '<MSG>third</MSG>', '<MSG>first</MSG>', NULL, 8, $3, $3, 1),
		(4300, 'dddd', 'eeee', '<MSG>x</MSG>', '<MSG>y</MSG>', NULL, 9, $4, $4, 1)`,
		testNow.Add(-time.Hour), testNow.Add(-50*time.Minute), testNow.Add(-10*time.Minute), testNow.Add(-5*time.Minute))
	client := controlv1.NewInspectServiceClient(b.conn)

	resp, err := client.ListMailboxReuse(as(t, "viewer"), &controlv1.ListMailboxReuseRequest{MsgId: 4242, WithTexts: true})
	require.NoError(t, err)
	require.Len(t, resp.GetEntries(), 2)
	requireProtoEqual(t, &controlv1.MailboxReuse{
		MsgId: 4242, TextSha256: "bbbb", FirstSha256: "aaaa", ReceivedAt: timestamppb.New(testNow.Add(-time.Hour)),
		DetectedAt: timestamppb.New(testNow.Add(-50 * time.Minute)), LastSeenAt: timestamppb.New(testNow.Add(-10 * time.Minute)),
		Seen: 3, Raw: "<MSG>second</MSG>", FirstRaw: "<MSG>first</MSG>",
	}, resp.GetEntries()[1])

	var seen []string
	tok := ""
	for range 4 {
		page, err := client.ListMailboxReuse(as(t, "viewer"), &controlv1.ListMailboxReuseRequest{Limit: 1, PageToken: tok})
		require.NoError(t, err)
		for _, e := range page.GetEntries() {
			require.Empty(t, e.GetRaw(), "texts only on request")
			seen = append(seen, e.GetTextSha256())
		}
		if tok = page.GetNextPageToken(); tok == "" {
			break
		}
	}
	require.Equal(t, []string{"dddd", "cccc", "bbbb"}, seen)

	_, err = client.ListMailboxReuse(as(t, "viewer"), &controlv1.ListMailboxReuseRequest{PageToken: "x.y"})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.ListMailboxReuse(as(t, "processor"), &controlv1.ListMailboxReuseRequest{})
	requireCode(t, codes.PermissionDenied, err)
}

// TestInspect_R_N9_AuditEveryTable: one listing reads every audit table
// (requeue, discard, lease, replay, message end, rebuild, outbound
// request, maintenance request, mailbox census), newest first, by kind and by operator,
// paged by token without a row lost or repeated.
func TestInspect_R_N9_AuditEveryTable(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	at := func(min int) time.Time { return testNow.Add(time.Duration(min) * time.Minute) }
	b.exec(t, `INSERT INTO outbox_requeue_audit (at, operator, reason, outbox_ids, principal, peer) VALUES ($1, 'alice', 'broker back', '{12,13}', 'alice', '10.0.0.1:5')`, at(-8))
	b.exec(t, `INSERT INTO outbox_discard_audit (at, action, operator, reason, outbox_ids) VALUES ($1, 'discard', 'bob', 'obsolete', '{14}')`, at(-7))
	b.exec(t, `INSERT INTO lease_audit (at, name, action, holder, token, operator, reason) VALUES ($1, 'processor', 'force-release', 'pod-a', 3, 'alice', 'pod gone')`, at(-6))
	b.exec(t, `INSERT INTO replay_request (id, msg_ids, selector, operator, reason, requested_at, principal) VALUES (5, '{42}', '{}', 'alice', 'fixed codec', $1, 'alice')`, at(-6))
	b.exec(t, `INSERT INTO replay_audit (msg_id, request_id, operator, reason, previous_state, previous_class, previous_attempts, at)
		VALUES (42, 5, 'alice', 'fixed codec', 'DEAD', 'CODEC_ERROR', 3, $1)`, at(-5))
	b.exec(t, `INSERT INTO message_end_audit (msg_id, operator, reason, previous_state, previous_attempts, backfill_outbox_id, at)
		VALUES (43, 'bob', 'poison', 'FAILED', 9, 77, $1)`, at(-4))
	b.exec(t, `INSERT INTO projection_rebuild (operator, reason, flights, active, deleted, max_msg_id, manifest_outbox_id, requested_at)
		VALUES ('alice', 'redis lost', 10, 9, 1, 99, 80, $1)`, at(-3))
	b.exec(t, `INSERT INTO req_track (type, stdb, stde, sender, seqn, xml, operator, reason, registered_at)
		VALUES ('RQFD', '01MAR26', '02MAR26', 'VIEW', '000001', '<MSG/>', 'bob', 'gap', $1)`, at(-2))
	b.exec(t, `INSERT INTO maintenance_request (job, dry_run, operator, reason, requested_at) VALUES ('cleanup', true, 'alice', 'how much', $1)`, at(-1))
	b.exec(t, `INSERT INTO mailbox_census (start_id, operator, principal, requested_at) VALUES (1000, 'carol', 'carol', $1)`, at(0))
	client := controlv1.NewInspectServiceClient(b.conn)

	all, err := client.ListAudit(as(t, "viewer"), &controlv1.ListAuditRequest{})
	require.NoError(t, err)
	var kinds []controlv1.AuditKind
	for _, e := range all.GetEntries() {
		kinds = append(kinds, e.GetKind())
	}
	require.Equal(t, []controlv1.AuditKind{
		controlv1.AuditKind_AUDIT_KIND_MAILBOX_CENSUS,
		controlv1.AuditKind_AUDIT_KIND_MAINTENANCE, controlv1.AuditKind_AUDIT_KIND_REQUEST, controlv1.AuditKind_AUDIT_KIND_REBUILD,
		controlv1.AuditKind_AUDIT_KIND_MESSAGE_END, controlv1.AuditKind_AUDIT_KIND_REPLAY, controlv1.AuditKind_AUDIT_KIND_LEASE,
		controlv1.AuditKind_AUDIT_KIND_DISCARD, controlv1.AuditKind_AUDIT_KIND_REQUEUE,
	}, kinds)
	requeue := all.GetEntries()[8]
	require.Equal(t, "outbox 12,13", requeue.GetSubject())
	require.Equal(t, "alice", requeue.GetPrincipal())
	require.Equal(t, "10.0.0.1:5", requeue.GetPeer())
	require.True(t, at(-8).Equal(requeue.GetAt().AsTime()))
	replayed := all.GetEntries()[5]
	require.Equal(t, "message 42", replayed.GetSubject())
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(replayed.GetDetailJson()), &detail))
	require.Equal(t, "CODEC_ERROR", detail["previous_class"])
	require.Equal(t, float64(5), detail["request_id"])
	require.Equal(t, "cleanup (dry run)", all.GetEntries()[1].GetAction())
	census := all.GetEntries()[0]
	require.Equal(t, "mailbox census 1", census.GetSubject())
	require.Equal(t, "census", census.GetAction())
	require.Equal(t, "carol", census.GetOperator())
	require.NoError(t, json.Unmarshal([]byte(census.GetDetailJson()), &detail))
	require.Equal(t, "PENDING", detail["state"])
	require.Equal(t, float64(1000), detail["start_id"])
	require.Equal(t, "lease processor", all.GetEntries()[6].GetSubject())

	lease, err := client.ListAudit(as(t, "viewer"), &controlv1.ListAuditRequest{Kind: controlv1.AuditKind_AUDIT_KIND_LEASE})
	require.NoError(t, err)
	require.Len(t, lease.GetEntries(), 1)
	require.Equal(t, "force-release", lease.GetEntries()[0].GetAction())
	bob, err := client.ListAudit(as(t, "viewer"), &controlv1.ListAuditRequest{Operator: "bob", Since: timestamppb.New(at(-3))})
	require.NoError(t, err)
	require.Len(t, bob.GetEntries(), 1, "bob's RQFD; his end audit is before since")

	var paged []controlv1.AuditKind
	tok := ""
	for range 5 {
		page, err := client.ListAudit(as(t, "viewer"), &controlv1.ListAuditRequest{Limit: 3, PageToken: tok})
		require.NoError(t, err)
		for _, e := range page.GetEntries() {
			paged = append(paged, e.GetKind())
		}
		if tok = page.GetNextPageToken(); tok == "" {
			break
		}
	}
	require.Equal(t, kinds, paged)
	_, err = client.ListAudit(as(t, "viewer"), &controlv1.ListAuditRequest{PageToken: "1.2"})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.ListAudit(as(t, "processor"), &controlv1.ListAuditRequest{})
	requireCode(t, codes.PermissionDenied, err)
}

// TestInspect_R_N9_ConsistencyCheck: a clean database is consistent; each
// kind of inconsistency the self-check and the delivery rely on is found,
// counted and sampled, older than the grace only.
func TestInspect_R_N9_ConsistencyCheck(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	client := controlv1.NewInspectServiceClient(b.conn)

	clean, err := client.CheckConsistency(as(t, "viewer"), &controlv1.CheckConsistencyRequest{})
	require.NoError(t, err)
	require.True(t, clean.GetOk())
	require.Len(t, clean.GetFindings(), 6)

	// The check reads the database's clock: states are aged against it.
	b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, applied_at, finished_at, updated_at) VALUES
		(1, 'APPLIED', '<MSG/>', 1, now() - interval '1 hour', NULL, now()),
		(2, 'SUCCEEDED', '<MSG/>', 2, now() - interval '1 hour', now() - interval '1 hour', now()),
		(3, 'APPLIED', '<MSG/>', 3, now() - interval '1 hour', NULL, now()),
		(4, 'APPLIED', '<MSG/>', 4, now(), NULL, now())`)
	b.exec(t, `INSERT INTO projection_pending (msg_id, flid, version) VALUES (3, 15, 2)`)
	b.exec(t, `INSERT INTO outbox (id, target, pkey, state, created_at) VALUES
		(10, 'msg', '15', 'PENDING', now() - interval '10 minutes'), (11, 'msg', '16', 'DEAD', now()),
		(12, 'msg', '17', 'PENDING', now())`)
	b.exec(t, `INSERT INTO flight (flid, operation_day, state, state_version, last_msg_id, doc) VALUES (20, '2026-03-01', 'ACTIVE', 1, 5, '{}'),
		(21, '2026-03-01', 'ACTIVE', 4, 6, '{}')`)
	b.exec(t, `INSERT INTO flight_history (flid, state_version, operation_day, state, last_msg_id, doc, created_at, updated_at, archived_at)
		VALUES (20, 2, '2026-01-01', 'DELETED', 4, '{}', now(), now(), now()), (21, 3, '2026-01-01', 'DELETED', 4, '{}', now(), now(), now())`)

	resp, err := client.CheckConsistency(as(t, "viewer"), &controlv1.CheckConsistencyRequest{GraceSeconds: 120})
	require.NoError(t, err)
	require.False(t, resp.GetOk())
	got := map[string][]int64{}
	for _, f := range resp.GetFindings() {
		require.Equal(t, int64(len(f.GetSampleIds())), f.GetCount(), f.GetName())
		require.NotEmpty(t, f.GetDescription())
		require.NotEmpty(t, f.GetRemedy())
		got[f.GetName()] = f.GetSampleIds()
	}
	require.Equal(t, map[string][]int64{
		"stranded-applied":          {1},  // 3 waits for its projection, 4 is younger than the grace
		"stranded-terminal":         {2},  // finished, unmarked, no intent
		"projection-unacknowledged": {15}, // 3's flight
		"outbox-undelivered":        {10}, // 12 is younger than the grace
		"outbox-dead":               {11},
		"version-regression":        {20}, // 21 continues above its history
	}, got)

	_, err = client.CheckConsistency(as(t, "viewer"), &controlv1.CheckConsistencyRequest{GraceSeconds: -1})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.CheckConsistency(as(t, "processor"), &controlv1.CheckConsistencyRequest{})
	requireCode(t, codes.PermissionDenied, err)
}

// TestMaintenance_R_N9_RequestListAndRuns: an operator's maintenance
// request is recorded PENDING with who asked, why, the credential and the
// peer (the processor runs it); reading it and the runs needs role read,
// asking needs operate; an unknown job or a missing reason is refused.
func TestMaintenance_R_N9_RequestListAndRuns(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	client := controlv1.NewMaintenanceServiceClient(b.conn)

	resp, err := client.RequestMaintenance(as(t, "alice"), &controlv1.RequestMaintenanceRequest{
		Job: controlv1.MaintenanceJob_MAINTENANCE_JOB_HISTORY_SWEEP, DryRun: true, Operator: " alice ", Reason: "how many flights are due"})
	require.NoError(t, err)
	r := resp.GetRequest()
	require.Positive(t, r.GetId())
	requireProtoEqual(t, &controlv1.MaintenanceRequest{Id: r.GetId(), Job: controlv1.MaintenanceJob_MAINTENANCE_JOB_HISTORY_SWEEP, DryRun: true,
		State: controlv1.MaintenanceRequestState_MAINTENANCE_REQUEST_STATE_PENDING, Operator: "alice", Reason: "how many flights are due",
		RequestedAt: timestamppb.New(testNow)}, r)
	var principal, job string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT principal, job FROM maintenance_request WHERE id = $1`, r.GetId()).Scan(&principal, &job))
	require.Equal(t, "alice", principal)
	require.Equal(t, "history-sweep", job)

	// What the processor records when it ran the request.
	b.exec(t, `UPDATE maintenance_request SET state = 'DONE', started_at = $2, finished_at = $2, result = '{"history_sweep":{"archived":3}}' WHERE id = $1`,
		r.GetId(), testNow.Add(time.Second))
	got, err := client.GetMaintenanceRequest(as(t, "viewer"), &controlv1.GetMaintenanceRequestRequest{Id: r.GetId()})
	require.NoError(t, err)
	require.Equal(t, controlv1.MaintenanceRequestState_MAINTENANCE_REQUEST_STATE_DONE, got.GetRequest().GetState())
	require.JSONEq(t, `{"history_sweep":{"archived":3}}`, got.GetRequest().GetResultJson())

	b.exec(t, `INSERT INTO maintenance_run (id, scheduled_for, started_at, finished_at, records_deleted, outbox_deleted, flights_archived,
			flights_skipped, flights_failed, tombstones) VALUES (1, $1, $1, $2, 5, 7, 3, 0, 0, 1)`, testNow.Add(-24*time.Hour), testNow.Add(-23*time.Hour))
	b.exec(t, `INSERT INTO maintenance_run (id, scheduled_for, started_at, job, request_id, flights_archived, flights_skipped, flights_failed, tombstones, error)
		VALUES (2, $1, $1, 'history-sweep', $2, 1, 0, 1, 0, 'flight 9: lock timeout')`, testNow, r.GetId())
	runs, err := client.ListMaintenanceRuns(as(t, "viewer"), &controlv1.ListMaintenanceRunsRequest{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, int64(2), runs.GetNextBeforeId())
	run := runs.GetRuns()[0]
	require.Equal(t, controlv1.MaintenanceJob_MAINTENANCE_JOB_HISTORY_SWEEP, run.GetJob())
	require.Equal(t, r.GetId(), run.GetRequestId())
	require.Nil(t, run.RecordsDeleted, "the cleanup did not run: no count, not 0")
	require.Equal(t, int64(1), run.GetFlightsFailed())
	require.Nil(t, run.GetFinishedAt())
	require.Equal(t, "flight 9: lock timeout", run.GetError())
	runs, err = client.ListMaintenanceRuns(as(t, "viewer"), &controlv1.ListMaintenanceRunsRequest{BeforeId: 2})
	require.NoError(t, err)
	require.Equal(t, controlv1.MaintenanceJob_MAINTENANCE_JOB_DAILY, runs.GetRuns()[0].GetJob())
	require.Equal(t, int64(5), runs.GetRuns()[0].GetRecordsDeleted())

	_, err = client.RequestMaintenance(as(t, "alice"), &controlv1.RequestMaintenanceRequest{Operator: "alice", Reason: "x"})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.RequestMaintenance(as(t, "alice"), &controlv1.RequestMaintenanceRequest{Job: controlv1.MaintenanceJob_MAINTENANCE_JOB_CLEANUP, Operator: "alice"})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.RequestMaintenance(as(t, "viewer"), &controlv1.RequestMaintenanceRequest{Job: controlv1.MaintenanceJob_MAINTENANCE_JOB_CLEANUP, Operator: "v", Reason: "r"})
	requireCode(t, codes.PermissionDenied, err)
	_, err = client.GetMaintenanceRequest(as(t, "viewer"), &controlv1.GetMaintenanceRequestRequest{Id: 999})
	requireCode(t, codes.NotFound, err)
}

// TestReplay_R_N9_ListReplayRequests: the recorded replay requests newest
// first, by state, paged, without their audit entries.
func TestReplay_R_N9_ListReplayRequests(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	b.exec(t, `INSERT INTO replay_request (id, msg_ids, selector, operator, reason, requested_at) VALUES
		(1, '{40}', '{"ids":[40]}', 'alice', 'one', $1), (3, '{42,43}', '{"class":"CODEC_ERROR"}', 'bob', 'three', $1)`, testNow)
	b.exec(t, `INSERT INTO replay_request (id, msg_ids, selector, operator, reason, requested_at, state, applied_at, replayed, refused, refused_ids)
		VALUES (2, '{41}', '{}', 'alice', 'two', $1, 'DONE', $1, 1, 0, '{}')`, testNow)
	client := controlv1.NewReplayServiceClient(b.conn)

	all, err := client.ListReplayRequests(as(t, "viewer"), &controlv1.ListReplayRequestsRequest{Limit: 2})
	require.NoError(t, err)
	require.Len(t, all.GetRequests(), 2)
	require.Equal(t, int64(3), all.GetRequests()[0].GetId())
	require.Equal(t, []int64{42, 43}, all.GetRequests()[0].GetMsgIds())
	require.JSONEq(t, `{"class":"CODEC_ERROR"}`, all.GetRequests()[0].GetSelectorJson())
	require.Equal(t, int64(2), all.GetNextBeforeId())
	rest, err := client.ListReplayRequests(as(t, "viewer"), &controlv1.ListReplayRequestsRequest{BeforeId: 2})
	require.NoError(t, err)
	require.Len(t, rest.GetRequests(), 1)
	require.Zero(t, rest.GetNextBeforeId())

	done, err := client.ListReplayRequests(as(t, "viewer"), &controlv1.ListReplayRequestsRequest{State: controlv1.ReplayRequestState_REPLAY_REQUEST_STATE_DONE})
	require.NoError(t, err)
	require.Len(t, done.GetRequests(), 1)
	require.Equal(t, int64(1), done.GetRequests()[0].GetReplayed())
	_, err = client.ListReplayRequests(as(t, "viewer"), &controlv1.ListReplayRequestsRequest{Limit: -2})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.ListReplayRequests(as(t, "processor"), &controlv1.ListReplayRequestsRequest{})
	requireCode(t, codes.PermissionDenied, err)
}

// TestInspect_R_N9_DatabaseStatus: the migration state (every migration
// applied, the schema version the highest), no invalid index, and a
// transaction open longer than the threshold, listed with its query.
func TestInspect_R_N9_DatabaseStatus(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	tx, err := b.pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), `SELECT count(*) FROM flight /* held open by the test */`)
	require.NoError(t, err)
	client := controlv1.NewInspectServiceClient(b.conn)

	var resp *controlv1.GetDatabaseStatusResponse
	require.Eventually(t, func() bool {
		resp, err = client.GetDatabaseStatus(as(t, "viewer"), &controlv1.GetDatabaseStatusRequest{TransactionAgeSeconds: 1})
		require.NoError(t, err)
		return len(resp.GetLongTransactions()) > 0
	}, 10*time.Second, 50*time.Millisecond, "the open transaction is listed once older than 1 s")
	require.Contains(t, resp.GetLongTransactions()[0].GetQuery(), "held open by the test")
	require.Equal(t, "idle in transaction", resp.GetLongTransactions()[0].GetState())
	require.Empty(t, resp.GetInvalidIndexes())
	require.GreaterOrEqual(t, resp.GetSchemaVersion(), int64(32), "maintenance_request (00032) is applied")
	require.Equal(t, resp.GetSchemaVersion(), resp.GetMigrations()[len(resp.GetMigrations())-1].GetVersion())
	require.Equal(t, int64(1), resp.GetMigrations()[0].GetVersion())

	_, err = client.GetDatabaseStatus(as(t, "viewer"), &controlv1.GetDatabaseStatusRequest{TransactionAgeSeconds: -1})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.GetDatabaseStatus(as(t, "processor"), &controlv1.GetDatabaseStatusRequest{})
	requireCode(t, codes.PermissionDenied, err)
}
