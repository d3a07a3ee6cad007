package control_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

func requireCode(t *testing.T, want codes.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, status.Code(err), "error: %v", err)
}

// TestAdmin_R_F1_GetMessage: message status by ID.
func TestAdmin_R_F1_GetMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	at := func(min int) time.Time { return testNow.Add(time.Duration(min) * time.Minute) }
	// A fully populated row and a minimal one (every nullable column NULL).
	b.exec(t, `INSERT INTO proc_state (msg_id, state, error_class, reason, attempts,
	    next_attempt_at, processing_started_at, identity_key, sndr, msg_type, msg_styp,
	    seqn, dttm, raw, received_at, kafka_offset, registered_at, applied_at,
	    finished_at, backfilled_at, updated_at)
	  VALUES (42, 'DEAD', 'EXHAUSTED', 'attempts exhausted: decoding FLOP: bad STOT', 5,
	    $1, $2, 'AODB|FLOP|UPDT|981', 'AODB', 'FLOP', 'UPDT',
	    '981', '20260301195500', '<MSG>raw</MSG>', $3, 7, $4, $5, $6, $7, $8)`,
		at(-1), at(-10), at(-20), at(-19), at(-9), at(-2), at(-1), at(-1))
	b.exec(t, `INSERT INTO proc_state (msg_id, raw, kafka_offset, registered_at, updated_at)
	  VALUES (43, '<MSG/>', 8, $1, $1)`, at(-5))

	full := &controlv1.Message{
		MsgId:               42,
		State:               controlv1.MessageState_MESSAGE_STATE_DEAD,
		ErrorClass:          controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED,
		Reason:              "attempts exhausted: decoding FLOP: bad STOT",
		Attempts:            5,
		NextAttemptAt:       timestamppb.New(at(-1)),
		ProcessingStartedAt: timestamppb.New(at(-10)),
		IdentityKey:         "AODB|FLOP|UPDT|981",
		Sndr:                "AODB",
		Type:                "FLOP",
		Styp:                "UPDT",
		Seqn:                "981",
		Dttm:                "20260301195500",
		ReceivedAt:          timestamppb.New(at(-20)),
		RegisteredAt:        timestamppb.New(at(-19)),
		AppliedAt:           timestamppb.New(at(-9)),
		FinishedAt:          timestamppb.New(at(-2)),
		BackfilledAt:        timestamppb.New(at(-1)),
		UpdatedAt:           timestamppb.New(at(-1)),
		KafkaOffset:         7,
	}

	t.Run("ReturnsEveryColumnWithoutRawByDefault", func(t *testing.T) {
		t.Parallel()
		resp, err := client.GetMessage(callCtx(t), &controlv1.GetMessageRequest{MsgId: 42})
		require.NoError(t, err)
		requireProtoEqual(t, full, resp.GetMessage())
	})
	t.Run("ReturnsRawOnRequest", func(t *testing.T) {
		t.Parallel()
		resp, err := client.GetMessage(callCtx(t), &controlv1.GetMessageRequest{MsgId: 42, IncludeRaw: true})
		require.NoError(t, err)
		require.Equal(t, "<MSG>raw</MSG>", resp.GetMessage().GetRaw())
	})
	t.Run("NullColumnsStayEmpty", func(t *testing.T) {
		t.Parallel()
		resp, err := client.GetMessage(callCtx(t), &controlv1.GetMessageRequest{MsgId: 43})
		require.NoError(t, err)
		requireProtoEqual(t, &controlv1.Message{
			MsgId:        43,
			State:        controlv1.MessageState_MESSAGE_STATE_PENDING,
			RegisteredAt: timestamppb.New(at(-5)),
			UpdatedAt:    timestamppb.New(at(-5)),
			KafkaOffset:  8,
		}, resp.GetMessage())
	})
	t.Run("UnknownIDIsNotFound", func(t *testing.T) {
		t.Parallel()
		_, err := client.GetMessage(callCtx(t), &controlv1.GetMessageRequest{MsgId: 44})
		requireCode(t, codes.NotFound, err)
		require.Contains(t, err.Error(), "message 44 not found")
	})
	t.Run("NonPositiveIDIsInvalid", func(t *testing.T) {
		t.Parallel()
		_, err := client.GetMessage(callCtx(t), &controlv1.GetMessageRequest{})
		requireCode(t, codes.InvalidArgument, err)
	})
}

// TestAdmin_R_F1_GetBacklog: backlog, oldest unprocessed age and
// terminal-but-unmarked count (R-F1, the figures behind R-F4's gauges).
func TestAdmin_R_F1_GetBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)

	t.Run("EmptyPipeline", func(t *testing.T) {
		resp, err := client.GetBacklog(callCtx(t), &controlv1.GetBacklogRequest{})
		require.NoError(t, err)
		requireProtoEqual(t, &controlv1.GetBacklogResponse{
			AsOf:   timestamppb.New(testNow),
			Counts: &controlv1.StateCounts{},
		}, resp)
	})

	hours := func(h int) time.Time { return testNow.Add(-time.Duration(h) * time.Hour) }
	rows := []struct {
		id                   int64
		state                string
		received, registered time.Time
		finished, backfilled *time.Time
	}{
		// Terminal and marked, and the oldest row of all: never "unfinished".
		{id: 1, state: "SUCCEEDED", received: hours(10), registered: hours(10), finished: ptr(hours(9)), backfilled: ptr(hours(9))},
		// Terminal, marker still missing.
		{id: 2, state: "SKIPPED", received: hours(8), registered: hours(8), finished: ptr(hours(8))},
		{id: 3, state: "DEAD", received: hours(7), registered: hours(7), finished: ptr(hours(7))},
		// Unfinished.
		{id: 4, state: "APPLIED", received: hours(2), registered: hours(2)},
		// received_at unknown: its age counts from registered_at, and it ties
		// with 7 on the time, so the smaller ID is the oldest.
		{id: 5, state: "FAILED", registered: hours(3)},
		{id: 6, state: "PENDING", received: hours(1), registered: hours(1)},
		{id: 7, state: "PENDING", received: hours(3), registered: hours(1)},
	}
	for _, r := range rows {
		var received *time.Time
		if !r.received.IsZero() {
			received = &r.received
		}
		b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, received_at, registered_at, finished_at, backfilled_at)
		  VALUES ($1, $2, '<MSG/>', $1, $3, $4, $5, $6)`, r.id, r.state, received, r.registered, r.finished, r.backfilled)
	}

	t.Run("CraftedDataSet", func(t *testing.T) {
		resp, err := client.GetBacklog(callCtx(t), &controlv1.GetBacklogRequest{})
		require.NoError(t, err)
		requireProtoEqual(t, &controlv1.GetBacklogResponse{
			AsOf:                       timestamppb.New(testNow),
			Counts:                     &controlv1.StateCounts{Pending: 2, Applied: 1, Succeeded: 1, Skipped: 1, Failed: 1, Dead: 1},
			Unfinished:                 4,
			OldestUnfinishedMsgId:      5,
			OldestUnfinishedSince:      timestamppb.New(hours(3)),
			OldestUnfinishedAgeSeconds: 3 * 3600,
			UnmarkedTerminal:           2,
		}, resp)
	})
	t.Run("AgeFollowsTheClock", func(t *testing.T) {
		b.clock.Advance(90 * time.Second)
		t.Cleanup(func() { b.clock.Set(testNow) })
		resp, err := client.GetBacklog(callCtx(t), &controlv1.GetBacklogRequest{})
		require.NoError(t, err)
		require.InDelta(t, 3*3600+90, resp.GetOldestUnfinishedAgeSeconds(), 1e-9)
	})
	t.Run("AgeNeverNegative", func(t *testing.T) {
		// A clock behind the database (skew between hosts) reports 0, not
		// a negative age.
		b.clock.Set(hours(5))
		t.Cleanup(func() { b.clock.Set(testNow) })
		resp, err := client.GetBacklog(callCtx(t), &controlv1.GetBacklogRequest{})
		require.NoError(t, err)
		require.Zero(t, resp.GetOldestUnfinishedAgeSeconds())
	})
}

// TestAdmin_R_F1_GetFlight: flight by FLID.
func TestAdmin_R_F1_GetFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	created, updated := testNow.Add(-time.Hour), testNow.Add(-time.Minute)
	b.exec(t, `INSERT INTO flight (flid, operation_day, state, state_version, master_flid, last_msg_id, doc, created_at, updated_at)
	  VALUES (15, '2021-01-23', 'ACTIVE', 3, 11, 42, '{"flno":"CA1234","legs":[1,2]}', $1, $2),
	         (16, NULL, 'DELETED', 7, NULL, 43, '{}', $1, $2)`, created, updated)

	t.Run("ActiveFlight", func(t *testing.T) {
		t.Parallel()
		resp, err := client.GetFlight(callCtx(t), &controlv1.GetFlightRequest{Flid: 15})
		require.NoError(t, err)
		got := resp.GetFlight()
		require.JSONEq(t, `{"flno":"CA1234","legs":[1,2]}`, got.GetDocJson())
		got.DocJson = ""
		requireProtoEqual(t, &controlv1.Flight{
			Flid:         15,
			State:        controlv1.FlightState_FLIGHT_STATE_ACTIVE,
			StateVersion: 3,
			OperationDay: "2021-01-23",
			MasterFlid:   11,
			LastMsgId:    42,
			CreatedAt:    timestamppb.New(created),
			UpdatedAt:    timestamppb.New(updated),
		}, got)
	})
	t.Run("DeletedFlightWithoutOperationDay", func(t *testing.T) {
		t.Parallel()
		resp, err := client.GetFlight(callCtx(t), &controlv1.GetFlightRequest{Flid: 16})
		require.NoError(t, err)
		require.Equal(t, controlv1.FlightState_FLIGHT_STATE_DELETED, resp.GetFlight().GetState())
		require.Empty(t, resp.GetFlight().GetOperationDay())
		require.Zero(t, resp.GetFlight().GetMasterFlid())
		require.JSONEq(t, `{}`, resp.GetFlight().GetDocJson())
	})
	t.Run("UnknownFLIDIsNotFound", func(t *testing.T) {
		t.Parallel()
		_, err := client.GetFlight(callCtx(t), &controlv1.GetFlightRequest{Flid: 17})
		requireCode(t, codes.NotFound, err)
		require.Contains(t, err.Error(), "flight 17 not found")
	})
	t.Run("NonPositiveFLIDIsInvalid", func(t *testing.T) {
		t.Parallel()
		_, err := client.GetFlight(callCtx(t), &controlv1.GetFlightRequest{Flid: -1})
		requireCode(t, codes.InvalidArgument, err)
	})
}

// TestAdmin_R_F1_R_D2_ListOutbox: DLQ list (R-D2 keeps DEAD rows as the
// dead-letter queue; R-F1 lists it).
func TestAdmin_R_F1_R_D2_ListOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	created := testNow.Add(-time.Hour)
	b.exec(t, `INSERT INTO outbox (id, target, pkey, payload, msg_id, state, attempts, next_attempt_at, last_error, outcome, created_at, sent_at) VALUES
	  (1, 'msg',     '15', 'p1', 42,   'SENT',    0, $1, NULL,                 NULL,             $1, $2),
	  (2, 'mailbox', '42', 'p2', 42,   'DEAD',    10, $2, 'mysql: connection refused', NULL,       $1, NULL),
	  (3, 'msg',     '16', 'p3', 43,   'PENDING', 2, $2, 'kafka: timeout',     NULL,             $1, NULL),
	  (4, 'msg',     '17', 'p4', NULL, 'DEAD',    5, $2, 'kafka: too large',   NULL,             $1, NULL),
	  (5, 'mailbox', '44', 'p5', 44,   'ABANDONED', 1, $2, NULL,               'row-missing',    $1, NULL)`,
		created, testNow)

	ids := func(r *controlv1.ListOutboxResponse) []int64 {
		var out []int64
		for _, e := range r.GetEntries() {
			out = append(out, e.GetId())
		}
		return out
	}
	tests := []struct {
		name     string
		req      *controlv1.ListOutboxRequest
		wantIDs  []int64
		wantNext int64
	}{
		{name: "EverythingInIDOrder", req: &controlv1.ListOutboxRequest{}, wantIDs: []int64{1, 2, 3, 4, 5}},
		{name: "DeadLetterQueue", req: &controlv1.ListOutboxRequest{State: controlv1.OutboxState_OUTBOX_STATE_DEAD}, wantIDs: []int64{2, 4}},
		{name: "ByTarget", req: &controlv1.ListOutboxRequest{Target: "msg"}, wantIDs: []int64{1, 3, 4}},
		{name: "ByTargetAndState", req: &controlv1.ListOutboxRequest{Target: "msg", State: controlv1.OutboxState_OUTBOX_STATE_DEAD}, wantIDs: []int64{4}},
		{name: "UnknownTargetIsEmpty", req: &controlv1.ListOutboxRequest{Target: "nope"}},
		{name: "FirstPage", req: &controlv1.ListOutboxRequest{Limit: 2}, wantIDs: []int64{1, 2}, wantNext: 2},
		{name: "MiddlePage", req: &controlv1.ListOutboxRequest{Limit: 2, AfterId: 2}, wantIDs: []int64{3, 4}, wantNext: 4},
		{name: "LastPage", req: &controlv1.ListOutboxRequest{Limit: 2, AfterId: 4}, wantIDs: []int64{5}},
		{name: "ExactlyFullLastPageHasNoNext", req: &controlv1.ListOutboxRequest{Limit: 3, AfterId: 2}, wantIDs: []int64{3, 4, 5}},
		{name: "LimitAboveMaximumIsReduced", req: &controlv1.ListOutboxRequest{Limit: 1_000_000}, wantIDs: []int64{1, 2, 3, 4, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := client.ListOutbox(callCtx(t), tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.wantIDs, ids(resp))
			require.Equal(t, tc.wantNext, resp.GetNextAfterId())
		})
	}

	t.Run("EntryCarriesEveryColumnButThePayload", func(t *testing.T) {
		t.Parallel()
		resp, err := client.ListOutbox(callCtx(t), &controlv1.ListOutboxRequest{Target: "mailbox"})
		require.NoError(t, err)
		require.Len(t, resp.GetEntries(), 2)
		requireProtoEqual(t, &controlv1.OutboxEntry{
			Id:            2,
			Target:        "mailbox",
			Pkey:          "42",
			MsgId:         42,
			State:         controlv1.OutboxState_OUTBOX_STATE_DEAD,
			Attempts:      10,
			NextAttemptAt: timestamppb.New(testNow),
			LastError:     "mysql: connection refused",
			CreatedAt:     timestamppb.New(created),
		}, resp.GetEntries()[0])
		require.Equal(t, "row-missing", resp.GetEntries()[1].GetOutcome())
	})
	t.Run("InvalidRequests", func(t *testing.T) {
		t.Parallel()
		for _, req := range []*controlv1.ListOutboxRequest{
			{Limit: -1},
			{AfterId: -1},
			{State: controlv1.OutboxState(99)},
		} {
			_, err := client.ListOutbox(callCtx(t), req)
			requireCode(t, codes.InvalidArgument, err)
		}
	})
}

func ptr[T any](v T) *T { return &v }
