package control_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestAdmin_R_H3_ListMessages: messages listed by state, error class and
// time (received_at, or registered_at where the mailbox gave none), in
// ascending mailbox ID, paged by ID, without the raw XML and without a
// replay preview (R-H3).
func TestAdmin_R_H3_ListMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := controlv1.NewAdminServiceClient(b.conn)
	at := func(min int) time.Time { return testNow.Add(time.Duration(min) * time.Minute) }
	// id, state, class, received (nil: unknown), registered
	rows := []struct {
		id         int64
		state      string
		class      *string
		received   *time.Time
		registered time.Time
	}{
		{1, "SUCCEEDED", nil, ptr(at(-100)), at(-100)},
		{2, "DEAD", ptr("MALFORMED"), ptr(at(-90)), at(-90)},
		{3, "SKIPPED", nil, ptr(at(-80)), at(-80)},
		{4, "DEAD", ptr("EXHAUSTED"), ptr(at(-70)), at(-70)},
		{5, "APPLIED", nil, ptr(at(-60)), at(-60)},
		{6, "FAILED", ptr("CODEC_ERROR"), nil, at(-50)}, // time = registered_at
		{7, "PENDING", nil, ptr(at(-40)), at(-5)},       // time = received_at, not registered_at
		{8, "DEAD", ptr("OPERATOR"), ptr(at(-30)), at(-30)},
		{9, "PENDING", nil, ptr(at(-20)), at(-20)},
		{10, "FAILED", ptr("INFRA"), ptr(at(-10)), at(-10)},
	}
	for _, r := range rows {
		b.exec(t, `INSERT INTO proc_state (msg_id, state, error_class, raw, kafka_offset, received_at, registered_at, updated_at)
		  VALUES ($1, $2, $3, '<MSG>secret</MSG>', $1, $4, $5, $5)`, r.id, r.state, r.class, r.received, r.registered)
	}
	ids := func(resp *controlv1.ListMessagesResponse) []int64 {
		var out []int64
		for _, m := range resp.GetMessages() {
			require.Empty(t, m.GetRaw(), "the raw XML is never listed")
			out = append(out, m.GetMsgId())
		}
		return out
	}
	const (
		pending   = controlv1.MessageState_MESSAGE_STATE_PENDING
		applied   = controlv1.MessageState_MESSAGE_STATE_APPLIED
		succeeded = controlv1.MessageState_MESSAGE_STATE_SUCCEEDED
		skipped   = controlv1.MessageState_MESSAGE_STATE_SKIPPED
		failed    = controlv1.MessageState_MESSAGE_STATE_FAILED
		dead      = controlv1.MessageState_MESSAGE_STATE_DEAD
	)
	classes := func(cs ...controlv1.ErrorClass) []controlv1.ErrorClass { return cs }
	states := func(ss ...controlv1.MessageState) []controlv1.MessageState { return ss }

	for _, tc := range []struct {
		name string
		req  *controlv1.ListMessagesRequest
		want []int64
	}{
		{"Everything", &controlv1.ListMessagesRequest{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"Pending", &controlv1.ListMessagesRequest{States: states(pending)}, []int64{7, 9}},
		{"UnfinishedInIDOrderAcrossStates", &controlv1.ListMessagesRequest{States: states(failed, applied, pending, pending)}, []int64{5, 6, 7, 9, 10}},
		{"EachTerminalState", &controlv1.ListMessagesRequest{States: states(dead, skipped, succeeded)}, []int64{1, 2, 3, 4, 8}},
		{"Class", &controlv1.ListMessagesRequest{ErrorClasses: classes(controlv1.ErrorClass_ERROR_CLASS_OPERATOR, controlv1.ErrorClass_ERROR_CLASS_CODEC_ERROR)}, []int64{6, 8}},
		{"StateAndClass", &controlv1.ListMessagesRequest{States: states(dead), ErrorClasses: classes(controlv1.ErrorClass_ERROR_CLASS_EXHAUSTED)}, []int64{4}},
		{"NoClassRecorded", &controlv1.ListMessagesRequest{ErrorClasses: classes(controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED)}, []int64{1, 3, 5, 7, 9}},
		{"NoClassOrInfra", &controlv1.ListMessagesRequest{States: states(failed, pending), ErrorClasses: classes(controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED, controlv1.ErrorClass_ERROR_CLASS_INFRA)}, []int64{7, 9, 10}},
		{"FromInclusive", &controlv1.ListMessagesRequest{From: timestamppb.New(at(-40))}, []int64{7, 8, 9, 10}},
		{"ToExclusive", &controlv1.ListMessagesRequest{To: timestamppb.New(at(-70))}, []int64{1, 2, 3}},
		{"RangeUsesRegisteredAtWithoutReceivedAt", &controlv1.ListMessagesRequest{From: timestamppb.New(at(-55)), To: timestamppb.New(at(-45))}, []int64{6}},
		{"RangeUsesReceivedAt", &controlv1.ListMessagesRequest{States: states(pending), From: timestamppb.New(at(-41)), To: timestamppb.New(at(-39))}, []int64{7}},
		{"AllFilters", &controlv1.ListMessagesRequest{States: states(dead, failed), ErrorClasses: classes(controlv1.ErrorClass_ERROR_CLASS_OPERATOR, controlv1.ErrorClass_ERROR_CLASS_MALFORMED, controlv1.ErrorClass_ERROR_CLASS_INFRA), From: timestamppb.New(at(-90)), To: timestamppb.New(at(-10))}, []int64{2, 8}},
		{"NothingMatches", &controlv1.ListMessagesRequest{States: states(applied), ErrorClasses: classes(controlv1.ErrorClass_ERROR_CLASS_PROTOCOL)}, nil},
		{"AfterID", &controlv1.ListMessagesRequest{States: states(pending, failed), AfterMsgId: 7}, []int64{9, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.ListMessages(callCtx(t), tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.want, ids(resp))
			require.Zero(t, resp.GetNextAfterMsgId(), "a page within the limit is the last")
		})
	}

	t.Run("RecordsAsGetMessageShowsThem", func(t *testing.T) {
		resp, err := client.ListMessages(callCtx(t), &controlv1.ListMessagesRequest{States: states(failed)})
		require.NoError(t, err)
		require.Len(t, resp.GetMessages(), 2)
		for _, m := range resp.GetMessages() {
			got, err := client.GetMessage(callCtx(t), &controlv1.GetMessageRequest{MsgId: m.GetMsgId()})
			require.NoError(t, err)
			requireProtoEqual(t, got.GetMessage(), m)
		}
	})

	t.Run("PagesByID", func(t *testing.T) {
		for _, req := range []*controlv1.ListMessagesRequest{
			{Limit: 3},
			{Limit: 2, States: states(dead, pending, failed)},
		} {
			var (
				all   []int64
				pages int
			)
			for {
				resp, err := client.ListMessages(callCtx(t), req)
				require.NoError(t, err)
				pages++
				got := ids(resp)
				require.LessOrEqual(t, len(got), int(req.GetLimit()))
				all = append(all, got...)
				if resp.GetNextAfterMsgId() == 0 {
					break
				}
				require.Equal(t, got[len(got)-1], resp.GetNextAfterMsgId())
				req.AfterMsgId = resp.GetNextAfterMsgId()
			}
			full, err := client.ListMessages(callCtx(t), &controlv1.ListMessagesRequest{States: req.GetStates()})
			require.NoError(t, err)
			require.Equal(t, ids(full), all, "the pages together are the whole list, each message once")
			require.Equal(t, (len(all)+int(req.GetLimit())-1)/int(req.GetLimit()), pages)
		}
	})

	t.Run("InvalidRequests", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			req  *controlv1.ListMessagesRequest
			want []string
		}{
			{"UnspecifiedState", &controlv1.ListMessagesRequest{States: states(controlv1.MessageState_MESSAGE_STATE_UNSPECIFIED)}, []string{"states: 0 is not a message state"}},
			{"UnknownClass", &controlv1.ListMessagesRequest{ErrorClasses: classes(controlv1.ErrorClass(99))}, []string{"error_classes: 99 is not an error class"}},
			{"NegativeLimitAndAfter", &controlv1.ListMessagesRequest{Limit: -1, AfterMsgId: -2}, []string{"limit -1: must not be negative", "after_msg_id -2: must not be negative"}},
			{"EmptyRange", &controlv1.ListMessagesRequest{From: timestamppb.New(at(0)), To: timestamppb.New(at(0))}, []string{"from 2026-03-01T12:00:00Z must be before to 2026-03-01T12:00:00Z"}},
			{"InvalidTimestamp", &controlv1.ListMessagesRequest{From: &timestamppb.Timestamp{Nanos: -1}}, []string{"from: not a valid timestamp"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := client.ListMessages(callCtx(t), tc.req)
				requireCode(t, codes.InvalidArgument, err)
				for _, w := range tc.want {
					require.ErrorContains(t, err, w)
				}
			})
		}
	})
}
