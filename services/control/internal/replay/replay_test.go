package replay

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"msgexchange/libs/clock"
	"msgexchange/libs/testutil"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/audit"
	"msgexchange/services/control/internal/controltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testNow is the fake clock's reading.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type bundle struct {
	pool   *pgxpool.Pool
	client controlv1.ReplayServiceClient
}

// setup serves a ReplayService over real gRPC on 127.0.0.1 against a new,
// migrated database holding the messages of fixture.
func setup(t *testing.T) *bundle {
	t.Helper()
	_, pool := controltest.MigratedPool(t)
	fixture(t, pool)

	logger := testutil.Logger(t, slog.LevelDebug)
	conn := controltest.Serve(t, func(srv *grpc.Server) {
		controlv1.RegisterReplayServiceServer(srv, NewServer(pool, clock.NewFake(testNow), logger, 10*time.Second))
	})
	return &bundle{pool: pool, client: controlv1.NewReplayServiceClient(conn)}
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// at is testNow shifted by hours.
func at(hours int) time.Time { return testNow.Add(time.Duration(hours) * time.Hour) }

// fixture is one message per interesting state; finished_at (DEAD, terminal)
// or updated_at (FAILED) is the hour offset from testNow.
//
//	1 DEAD CODEC_ERROR   -5h   replayable
//	2 DEAD MALFORMED     -5h
//	3 FAILED INFRA       -4h   replayable
//	4 SUCCEEDED          -4h
//	5 DEAD PROTOCOL      -3h
//	6 SKIPPED            -3h
//	7 DEAD EXHAUSTED     -30h  replayable, outside the day
//	8 DEAD UNSUPPORTED   -2h   replayable
//	9 PENDING
func fixture(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows := []struct {
		id     int64
		state  string
		class  *string
		reason string
		hours  int
	}{
		{1, "DEAD", ptr("CODEC_ERROR"), "gave up", -5},
		{2, "DEAD", ptr("MALFORMED"), "not XML", -5},
		{3, "FAILED", ptr("INFRA"), "connection refused", -4},
		{4, "SUCCEEDED", nil, "", -4},
		{5, "DEAD", ptr("PROTOCOL"), "RECS mismatch", -3},
		{6, "SKIPPED", nil, "duplicate-of:4", -3},
		{7, "DEAD", ptr("EXHAUSTED"), "gave up after 5 attempts", -30},
		{8, "DEAD", ptr("UNSUPPORTED"), "no handler for ZZZZ", -2},
		{9, "PENDING", nil, "", 0},
	}
	for _, r := range rows {
		var finished *time.Time
		if r.state != "FAILED" && r.state != "PENDING" {
			f := at(r.hours)
			finished = &f
		}
		_, err := pool.Exec(context.Background(), `
			INSERT INTO proc_state (msg_id, state, error_class, reason, attempts, raw, kafka_offset, msg_type, msg_styp,
				finished_at, updated_at, identity_key)
			VALUES ($1, $2, $3, NULLIF($4, ''), 2, '<MSG/>', $1, 'FLOP', 'STND', $5, $6, $7)`,
			r.id, r.state, r.class, r.reason, finished, at(r.hours), "AODB|FLOP|STND|"+string(rune('0'+r.id)))
		require.NoError(t, err)
	}
}

func ptr(s string) *string { return &s }

// snapshot is every proc_state row, to prove the control plane wrote none.
func (b *bundle) snapshot(t *testing.T) string {
	t.Helper()
	var s string
	require.NoError(t, b.pool.QueryRow(ctxT(t), `SELECT string_agg(to_jsonb(p)::text, E'\n' ORDER BY msg_id) FROM proc_state p`).Scan(&s))
	return s
}

func requireCode(t *testing.T, want codes.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, status.Code(err), "%v", err)
}

func ids(cs []*controlv1.ReplayCandidate) []int64 {
	out := []int64{}
	for _, c := range cs {
		out = append(out, c.GetMsgId())
	}
	return out
}

// TestPreview_R_F1_US10_ByIDs: a preview by mailbox IDs lists each message
// as it is, replayable only when FAILED or DEAD with a whitelisted class;
// the others carry the reason; unknown IDs are listed apart; nothing
// changes.
func TestPreview_R_F1_US10_ByIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.snapshot(t)
	resp, err := b.client.Preview(ctxT(t), &controlv1.PreviewReplayRequest{Selector: &controlv1.ReplaySelector{
		MsgIds: []int64{9, 1, 2, 3, 4, 5, 6, 99, 1}}})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 9}, ids(resp.GetMessages()))
	require.Equal(t, int64(7), resp.GetCount())
	require.Equal(t, int64(2), resp.GetReplayableCount())
	require.Equal(t, []int64{99}, resp.GetMissingIds())
	require.False(t, resp.GetTruncated())
	refusals := map[int64]string{
		2: "error class MALFORMED is not replayable",
		4: "state SUCCEEDED is not replayable",
		5: "error class PROTOCOL is not replayable",
		6: "state SKIPPED is not replayable",
		9: "state PENDING is not replayable",
	}
	for _, c := range resp.GetMessages() {
		want, refused := refusals[c.GetMsgId()]
		require.Equal(t, !refused, c.GetReplayable(), "message %d", c.GetMsgId())
		if refused {
			require.Contains(t, c.GetRefusal(), want)
		} else {
			require.Empty(t, c.GetRefusal())
		}
	}
	first := resp.GetMessages()[0]
	require.Equal(t, controlv1.MessageState_MESSAGE_STATE_DEAD, first.GetState())
	require.Equal(t, controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR, first.GetErrorClass())
	require.Equal(t, "gave up", first.GetReason())
	require.Equal(t, "FLOP", first.GetType())
	require.Equal(t, "STND", first.GetStyp())
	require.Equal(t, int32(2), first.GetAttempts())
	require.True(t, first.GetFinishedAt().AsTime().Equal(at(-5)))
	require.Nil(t, resp.GetMessages()[2].GetFinishedAt(), "a FAILED message has no finish time")
	require.Equal(t, before, b.snapshot(t))
}

// TestPreview_R_F1_ByClassAndTimeRange: a class selection matches FAILED
// and DEAD messages of those classes whose finished_at (updated_at when
// FAILED) lies in [from, to), smallest ID first, up to the limit.
func TestPreview_R_F1_ByClassAndTimeRange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	day := func(classes ...controlv1.ErrorClass) *controlv1.ReplaySelector {
		return &controlv1.ReplaySelector{ErrorClasses: classes, From: timestamppb.New(at(-24)), To: timestamppb.New(at(-2))}
	}
	for _, tc := range []struct {
		name       string
		sel        *controlv1.ReplaySelector
		want       []int64
		replayable int64
		truncated  bool
	}{
		{"WhitelistedClassesInRange", day(controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR, controlv1.ErrorClass_ERROR_CLASS_INFRA,
			controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED, controlv1.ErrorClass_ERROR_CLASS_UNSUPPORTED), []int64{1, 3}, 2, false},
		{"ToIsExclusive", &controlv1.ReplaySelector{ErrorClasses: []controlv1.ErrorClass{controlv1.ErrorClass_ERROR_CLASS_UNSUPPORTED},
			From: timestamppb.New(at(-24)), To: timestamppb.New(at(-2).Add(time.Microsecond))}, []int64{8}, 1, false},
		{"OlderRange", &controlv1.ReplaySelector{ErrorClasses: []controlv1.ErrorClass{controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED},
			From: timestamppb.New(at(-48)), To: timestamppb.New(at(-24))}, []int64{7}, 1, false},
		{"NonWhitelistedClassOnlyReported", day(controlv1.ErrorClass_ERROR_CLASS_MALFORMED, controlv1.ErrorClass_ERROR_CLASS_PROTOCOL), []int64{2, 5}, 0, false},
		{"Limit", func() *controlv1.ReplaySelector {
			s := day(controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR, controlv1.ErrorClass_ERROR_CLASS_INFRA)
			s.Limit = 1
			return s
		}(), []int64{1}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := b.client.Preview(ctxT(t), &controlv1.PreviewReplayRequest{Selector: tc.sel})
			require.NoError(t, err)
			require.Equal(t, tc.want, ids(resp.GetMessages()))
			require.Equal(t, tc.replayable, resp.GetReplayableCount())
			require.Equal(t, tc.truncated, resp.GetTruncated())
			require.Empty(t, resp.GetMissingIds())
		})
	}
}

// TestSelector_R_F1_InvalidRefused: a selector must name IDs or classes
// with a full, ordered time range, never both; every problem is reported.
func TestSelector_R_F1_InvalidRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	codec := []controlv1.ErrorClass{controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR}
	for _, tc := range []struct {
		name string
		sel  *controlv1.ReplaySelector
		want string
	}{
		{"Missing", nil, "give msg_ids, or error_classes"},
		{"Empty", &controlv1.ReplaySelector{}, "give msg_ids, or error_classes"},
		{"Mixed", &controlv1.ReplaySelector{MsgIds: []int64{1}, ErrorClasses: codec}, "cannot be combined"},
		{"IDsWithRange", &controlv1.ReplaySelector{MsgIds: []int64{1}, From: timestamppb.New(at(-1))}, "cannot be combined"},
		{"NonPositiveID", &controlv1.ReplaySelector{MsgIds: []int64{1, 0, -3}}, "msg_id -3: must be a positive"},
		{"TooManyIDs", &controlv1.ReplaySelector{MsgIds: make([]int64, MaxIDs+1)}, "at most 1000"},
		{"ClassWithoutRange", &controlv1.ReplaySelector{ErrorClasses: codec}, "need both from and to"},
		{"ClassWithoutTo", &controlv1.ReplaySelector{ErrorClasses: codec, From: timestamppb.New(at(-1))}, "need both from and to"},
		{"EmptyRange", &controlv1.ReplaySelector{ErrorClasses: codec, From: timestamppb.New(at(0)), To: timestamppb.New(at(0))}, "must be before to"},
		{"UnspecifiedClass", &controlv1.ReplaySelector{ErrorClasses: []controlv1.ErrorClass{0}, From: timestamppb.New(at(-1)), To: timestamppb.New(at(0))}, "not a value of ErrorClass"},
		{"UnknownClass", &controlv1.ReplaySelector{ErrorClasses: []controlv1.ErrorClass{42}, From: timestamppb.New(at(-1)), To: timestamppb.New(at(0))}, "error class 42"},
		{"NegativeLimit", &controlv1.ReplaySelector{ErrorClasses: codec, From: timestamppb.New(at(-1)), To: timestamppb.New(at(0)), Limit: -1}, "limit -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.client.Preview(ctxT(t), &controlv1.PreviewReplayRequest{Selector: tc.sel})
			requireCode(t, codes.InvalidArgument, err)
			require.Contains(t, status.Convert(err).Message(), tc.want)
			_, err = b.client.Execute(ctxT(t), &controlv1.ExecuteReplayRequest{Selector: tc.sel, Operator: "alice", Reason: "fix"})
			requireCode(t, codes.InvalidArgument, err)
		})
	}
}

// TestExecute_R_F1_US10_RecordsRequestForTheProcessor: Execute records a
// PENDING replay_request naming only the replayable messages, with the
// operator, the reason and the selector, and changes no processing state
// (the processor applies it); the left-out messages are returned. A
// message waiting in a pending request is not taken again, and a request
// reads back with its outcome and audit rows once applied.
func TestExecute_R_F1_US10_RecordsRequestForTheProcessor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.snapshot(t)
	resp, err := b.client.Execute(ctxT(t), &controlv1.ExecuteReplayRequest{
		Selector: &controlv1.ReplaySelector{MsgIds: []int64{1, 2, 3, 4, 99}},
		Operator: "alice", Reason: "codec fixed in 2.4",
	})
	require.NoError(t, err)
	r := resp.GetRequest()
	require.Positive(t, r.GetId())
	require.Equal(t, controlv1.ReplayRequestState_REPLAY_REQUEST_STATE_PENDING, r.GetState())
	require.Equal(t, []int64{1, 3}, r.GetMsgIds())
	require.Equal(t, "alice", r.GetOperator())
	require.Equal(t, "codec fixed in 2.4", r.GetReason())
	require.True(t, r.GetRequestedAt().AsTime().Equal(testNow))
	require.Nil(t, r.GetAppliedAt())
	require.JSONEq(t, `{"msg_ids":[1,2,3,4,99]}`, r.GetSelectorJson())
	require.Equal(t, []int64{2, 4}, ids(resp.GetNotReplayable()))
	require.Equal(t, []int64{99}, resp.GetMissingIds())
	require.Equal(t, before, b.snapshot(t), "the control plane never writes processing state")

	// Already waiting: not taken into a second request.
	pre, err := b.client.Preview(ctxT(t), &controlv1.PreviewReplayRequest{Selector: &controlv1.ReplaySelector{MsgIds: []int64{1, 8}}})
	require.NoError(t, err)
	require.False(t, pre.GetMessages()[0].GetReplayable())
	require.Contains(t, pre.GetMessages()[0].GetRefusal(), "already waiting in replay request")
	second, err := b.client.Execute(ctxT(t), &controlv1.ExecuteReplayRequest{
		Selector: &controlv1.ReplaySelector{MsgIds: []int64{1, 8}}, Operator: "bob", Reason: "handler added"})
	require.NoError(t, err)
	require.Equal(t, []int64{8}, second.GetRequest().GetMsgIds())
	_, err = b.client.Execute(ctxT(t), &controlv1.ExecuteReplayRequest{
		Selector: &controlv1.ReplaySelector{MsgIds: []int64{1, 3}}, Operator: "bob", Reason: "again"})
	requireCode(t, codes.FailedPrecondition, err)

	// By class and range, the stored selector keeps the range.
	byClass, err := b.client.Execute(ctxT(t), &controlv1.ExecuteReplayRequest{
		Selector: &controlv1.ReplaySelector{ErrorClasses: []controlv1.ErrorClass{controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED},
			From: timestamppb.New(at(-48)), To: timestamppb.New(at(-24))},
		Operator: "carol", Reason: "outage over"})
	require.NoError(t, err)
	require.Equal(t, []int64{7}, byClass.GetRequest().GetMsgIds())
	var sel map[string]any
	require.NoError(t, json.Unmarshal([]byte(byClass.GetRequest().GetSelectorJson()), &sel))
	require.Equal(t, []any{"EXHAUSTED"}, sel["error_classes"])
	require.Equal(t, at(-48).Format(time.RFC3339), sel["from"])
	require.EqualValues(t, DefaultLimit, sel["limit"])

	got, err := b.client.GetReplayRequest(ctxT(t), &controlv1.GetReplayRequestRequest{Id: r.GetId()})
	require.NoError(t, err)
	require.Equal(t, controlv1.ReplayRequestState_REPLAY_REQUEST_STATE_PENDING, got.GetRequest().GetState())
	require.Empty(t, got.GetRequest().GetEntries())

	// What the processor's executor writes when it applies the request.
	_, err = b.pool.Exec(ctxT(t), `
		WITH a AS (INSERT INTO replay_audit (msg_id, request_id, operator, reason, previous_state, previous_class, previous_attempts, previous_reason, at)
		           VALUES (1, $1, 'alice', 'codec fixed in 2.4', 'DEAD', 'CODEC_ERROR', 2, 'gave up', $2))
		UPDATE replay_request SET state='DONE', applied_at=$2, replayed=1, refused=1, refused_ids='{3}' WHERE id=$1`, r.GetId(), at(1))
	require.NoError(t, err)
	got, err = b.client.GetReplayRequest(ctxT(t), &controlv1.GetReplayRequestRequest{Id: r.GetId()})
	require.NoError(t, err)
	done := got.GetRequest()
	require.Equal(t, controlv1.ReplayRequestState_REPLAY_REQUEST_STATE_DONE, done.GetState())
	require.True(t, done.GetAppliedAt().AsTime().Equal(at(1)))
	require.Equal(t, int64(1), done.GetReplayed())
	require.Equal(t, int64(1), done.GetRefused())
	require.Equal(t, []int64{3}, done.GetRefusedIds())
	require.Len(t, done.GetEntries(), 1)
	e := done.GetEntries()[0]
	require.Equal(t, int64(1), e.GetMsgId())
	require.Equal(t, controlv1.MessageState_MESSAGE_STATE_DEAD, e.GetPreviousState())
	require.Equal(t, controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR, e.GetPreviousClass())
	require.Equal(t, int32(2), e.GetPreviousAttempts())
	require.Equal(t, "gave up", e.GetPreviousReason())

	// Applied: message 1 may be requested again.
	_, err = b.client.Execute(ctxT(t), &controlv1.ExecuteReplayRequest{
		Selector: &controlv1.ReplaySelector{MsgIds: []int64{1}}, Operator: "alice", Reason: "once more"})
	require.NoError(t, err)
}

// TestExecute_R_F1_OperatorAndReasonRequired: without an operator or a
// reason nothing is recorded.
func TestExecute_R_F1_OperatorAndReasonRequired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sel := &controlv1.ReplaySelector{MsgIds: []int64{1}}
	for _, tc := range []struct {
		name, operator, reason string
		want                   []string
	}{
		{"NoOperator", "", "fix", []string{"operator is required"}},
		{"NoReason", "alice", "", []string{"reason is required"}},
		{"Blank", "  ", "\t", []string{"operator is required", "reason is required"}},
		{"TooLong", "alice", strings.Repeat("x", audit.MaxLen+1), []string{"reason is longer than 500"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.client.Execute(ctxT(t), &controlv1.ExecuteReplayRequest{Selector: sel, Operator: tc.operator, Reason: tc.reason})
			requireCode(t, codes.InvalidArgument, err)
			for _, w := range tc.want {
				require.Contains(t, status.Convert(err).Message(), w)
			}
		})
	}
	var n int
	require.NoError(t, b.pool.QueryRow(ctxT(t), `SELECT count(*) FROM replay_request`).Scan(&n))
	require.Zero(t, n)
}

// TestExecute_R_F1_NothingReplayableRecordsNothing: a selection without a
// replayable message is refused with FAILED_PRECONDITION and no request.
func TestExecute_R_F1_NothingReplayableRecordsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.client.Execute(ctxT(t), &controlv1.ExecuteReplayRequest{
		Selector: &controlv1.ReplaySelector{MsgIds: []int64{2, 4, 5, 6, 9, 99}}, Operator: "alice", Reason: "try"})
	requireCode(t, codes.FailedPrecondition, err)
	require.Contains(t, status.Convert(err).Message(), "none of the selected messages is replayable")
	var n int
	require.NoError(t, b.pool.QueryRow(ctxT(t), `SELECT count(*) FROM replay_request`).Scan(&n))
	require.Zero(t, n)
}

// TestGetReplayRequest_R_F1_UnknownAndInvalid: NOT_FOUND for an unknown
// request, INVALID_ARGUMENT for a non-positive ID.
func TestGetReplayRequest_R_F1_UnknownAndInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.client.GetReplayRequest(ctxT(t), &controlv1.GetReplayRequestRequest{Id: 77})
	requireCode(t, codes.NotFound, err)
	_, err = b.client.GetReplayRequest(ctxT(t), &controlv1.GetReplayRequestRequest{Id: 0})
	requireCode(t, codes.InvalidArgument, err)
}
