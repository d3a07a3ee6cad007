package control_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
)

// seedTrail writes what the processor records for flight 15: two changes
// (msg events encoded by the production encoder, with their messages'
// proc_state), a change of another flight, the current row and an archived
// version.
func seedTrail(t *testing.T, b *testBundle) {
	t.Helper()
	enc := contract.Encoder{Zone: time.UTC}
	for i, c := range []contract.Change{
		{FLID: 15, StateVersion: 1, EventType: contract.EventCreated, OperationDay: "2026-03-01", Changed: []string{"FLNO", "STOT"},
			Source:     &contract.Source{MsgID: 41, Type: "FLOP", Subtype: "NEW", Sender: "AODB", Seqn: "000041"},
			OccurredAt: testNow.Add(-2 * time.Hour), Flight: flight.Doc{"FLNO": "CA1234", "STOT": "01MAR261200"}},
		{FLID: 15, StateVersion: 2, EventType: contract.EventUpdated, OperationDay: "2026-03-01", Changed: []string{"STND"},
			Source:     &contract.Source{MsgID: 42, Type: "FLOP", Subtype: "UPDT", Sender: "AODB", Seqn: "000042"},
			OccurredAt: testNow.Add(-time.Hour), Flight: flight.Doc{"FLNO": "CA1234", "STOT": "01MAR261200", "STND": "S209"}},
		{FLID: 16, StateVersion: 1, EventType: contract.EventCreated, Changed: []string{"FLNO"},
			Source:     &contract.Source{MsgID: 43, Type: "FLOP", Subtype: "NEW", Sender: "AODB", Seqn: "000043"},
			OccurredAt: testNow.Add(-time.Hour), Flight: flight.Doc{"FLNO": "MU5100"}},
	} {
		rec, err := enc.Msg(c)
		require.NoError(t, err)
		state := "SENT"
		if i == 1 {
			state = "PENDING"
		}
		b.exec(t, `INSERT INTO outbox (id, target, pkey, payload, msg_id, state, sent_at)
			VALUES ($1, 'msg', $2, $3, $4, $5, CASE WHEN $5 = 'SENT' THEN $6::timestamptz END)`,
			10+i, rec.Key, rec.Value, c.Source.MsgID, state, testNow.Add(-30*time.Minute))
	}
	b.exec(t, `INSERT INTO outbox (id, target, pkey, payload, msg_id) VALUES (20, 'schd', '15', 'x', 42)`)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset) VALUES (41, 'SUCCEEDED', '<MSG/>', 1), (42, 'APPLIED', '<MSG/>', 2)`)
	b.exec(t, `INSERT INTO flight (flid, operation_day, state, state_version, last_msg_id, doc, created_at, updated_at)
		VALUES (15, '2026-03-01', 'ACTIVE', 2, 42, '{"FLNO":"CA1234"}', $1, $1)`, testNow.Add(-time.Hour))
	b.exec(t, `INSERT INTO flight_history (flid, state_version, operation_day, state, last_msg_id, doc, created_at, updated_at, archived_at)
		VALUES (17, 3, '2026-01-01', 'DELETED', 7, '{}', $1, $1, $2)`, testNow.Add(-90*24*time.Hour), testNow.Add(-24*time.Hour))
}

// TestInspect_R_N9_FlightTrail: a flight's trail lists every change still
// in the outbox, newest first, with the causing message, its outcome, the
// changed keys, version, time and delivery; it pages; an archived flight
// shows its archived versions; a FLID with nothing recorded is NOT_FOUND;
// role read suffices and no token is refused.
func TestInspect_R_N9_FlightTrail(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	seedTrail(t, b)
	client := controlv1.NewInspectServiceClient(b.conn)

	resp, err := client.GetFlightTrail(as(t, "viewer"), &controlv1.GetFlightTrailRequest{Flid: 15})
	require.NoError(t, err)
	require.Equal(t, int64(2), resp.GetCurrent().GetStateVersion())
	require.Empty(t, resp.GetArchived())
	require.Zero(t, resp.GetNextBeforeOutboxId())
	requireProtoEqual(t, &controlv1.GetFlightTrailResponse{
		Flid:    15,
		Current: resp.GetCurrent(),
		Entries: []*controlv1.FlightTrailEntry{
			{OutboxId: 11, StateVersion: 2, EventType: contract.EventUpdated, Changed: []string{"STND"},
				OccurredAt: timestamppb.New(testNow.Add(-time.Hour)), MsgId: 42, MsgType: "FLOP", MsgSubtype: "UPDT", Sender: "AODB", Seqn: "000042",
				MessageState: controlv1.MessageState_MESSAGE_STATE_APPLIED, Delivery: controlv1.OutboxState_OUTBOX_STATE_PENDING},
			{OutboxId: 10, StateVersion: 1, EventType: contract.EventCreated, Changed: []string{"FLNO", "STOT"},
				OccurredAt: timestamppb.New(testNow.Add(-2 * time.Hour)), MsgId: 41, MsgType: "FLOP", MsgSubtype: "NEW", Sender: "AODB", Seqn: "000041",
				MessageState: controlv1.MessageState_MESSAGE_STATE_SUCCEEDED, Delivery: controlv1.OutboxState_OUTBOX_STATE_SENT,
				DeliveredAt: timestamppb.New(testNow.Add(-30 * time.Minute))},
		},
	}, resp)

	page, err := client.GetFlightTrail(as(t, "viewer"), &controlv1.GetFlightTrailRequest{Flid: 15, Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.GetEntries(), 1)
	require.Equal(t, int64(11), page.GetNextBeforeOutboxId())
	page, err = client.GetFlightTrail(as(t, "viewer"), &controlv1.GetFlightTrailRequest{Flid: 15, Limit: 1, BeforeOutboxId: 11})
	require.NoError(t, err)
	require.Equal(t, int64(10), page.GetEntries()[0].GetOutboxId())
	require.Zero(t, page.GetNextBeforeOutboxId())

	archived, err := client.GetFlightTrail(as(t, "viewer"), &controlv1.GetFlightTrailRequest{Flid: 17})
	require.NoError(t, err)
	require.Nil(t, archived.GetCurrent())
	require.Len(t, archived.GetArchived(), 1)
	require.Equal(t, controlv1.FlightState_FLIGHT_STATE_DELETED, archived.GetArchived()[0].GetState())
	require.Equal(t, "2026-01-01", archived.GetArchived()[0].GetOperationDay())

	_, err = client.GetFlightTrail(as(t, "viewer"), &controlv1.GetFlightTrailRequest{Flid: 99})
	requireCode(t, codes.NotFound, err)
	_, err = client.GetFlightTrail(as(t, "viewer"), &controlv1.GetFlightTrailRequest{Flid: 15, Limit: -1})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.GetFlightTrail(as(t, "processor"), &controlv1.GetFlightTrailRequest{Flid: 15})
	requireCode(t, codes.PermissionDenied, err)
	_, err = client.GetFlightTrail(plainCtx(t), &controlv1.GetFlightTrailRequest{Flid: 15})
	requireCode(t, codes.Unauthenticated, err)
}
