package control_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestMailboxCensus_R_L6_R_N9_RequestAndGet: an operator's mailbox census
// is recorded PENDING with its start, who asked, the credential and the
// peer (a dispatcher counts it); the figures it records read back as set,
// the counts from a start absent for a census without one. Asking needs
// operate (each census costs the mailbox a scan), reading needs read; a
// missing operator or a negative start is refused, an unknown ID is not
// found.
func TestMailboxCensus_R_L6_R_N9_RequestAndGet(t *testing.T) {
	t.Parallel()
	var tokens string
	b := setup(t, withTokenFile(t, &tokens))
	client := controlv1.NewMaintenanceServiceClient(b.conn)

	resp, err := client.RequestMailboxCensus(as(t, "alice"), &controlv1.RequestMailboxCensusRequest{StartId: 120, Operator: " alice "})
	require.NoError(t, err)
	c := resp.GetCensus()
	require.Positive(t, c.GetId())
	requireProtoEqual(t, &controlv1.MailboxCensus{Id: c.GetId(), StartId: 120, State: controlv1.MailboxCensusState_MAILBOX_CENSUS_STATE_PENDING,
		Operator: "alice", RequestedAt: timestamppb.New(testNow)}, c)
	var principal string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT principal FROM mailbox_census WHERE id = $1`, c.GetId()).Scan(&principal))
	require.Equal(t, "alice", principal)

	// What a dispatcher records when it counted the census.
	done := testNow.Add(time.Second)
	b.exec(t, `UPDATE mailbox_census SET state = 'DONE', started_at = $2, finished_at = $2, next_id = 200, rows_from_start = 80,
		after_last_marked = 150, unmarked_from_start = 50, unmarked_below_start = 0 WHERE id = $1`, c.GetId(), done)
	got, err := client.GetMailboxCensus(as(t, "viewer"), &controlv1.GetMailboxCensusRequest{Id: c.GetId()})
	require.NoError(t, err)
	requireProtoEqual(t, &controlv1.MailboxCensus{Id: c.GetId(), StartId: 120, State: controlv1.MailboxCensusState_MAILBOX_CENSUS_STATE_DONE,
		Operator: "alice", RequestedAt: timestamppb.New(testNow), StartedAt: timestamppb.New(done), FinishedAt: timestamppb.New(done),
		NextId: proto.Int64(200), RowsFromStart: proto.Int64(80), AfterLastMarked: proto.Int64(150),
		UnmarkedFromStart: proto.Int64(50), UnmarkedBelowStart: proto.Int64(0)}, got.GetCensus())

	// Without a start: only the two figures that need none.
	resp, err = client.RequestMailboxCensus(as(t, "alice"), &controlv1.RequestMailboxCensusRequest{Operator: "alice"})
	require.NoError(t, err)
	b.exec(t, `UPDATE mailbox_census SET state = 'FAILED', started_at = $2, finished_at = $2, error = 'mailbox: timeout' WHERE id = $1`,
		resp.GetCensus().GetId(), done)
	got, err = client.GetMailboxCensus(as(t, "viewer"), &controlv1.GetMailboxCensusRequest{Id: resp.GetCensus().GetId()})
	require.NoError(t, err)
	require.Equal(t, controlv1.MailboxCensusState_MAILBOX_CENSUS_STATE_FAILED, got.GetCensus().GetState())
	require.Equal(t, "mailbox: timeout", got.GetCensus().GetError())
	require.Zero(t, got.GetCensus().GetStartId())
	require.Nil(t, got.GetCensus().RowsFromStart, "no start: no count, not 0")

	_, err = client.RequestMailboxCensus(as(t, "alice"), &controlv1.RequestMailboxCensusRequest{StartId: 1})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.RequestMailboxCensus(as(t, "alice"), &controlv1.RequestMailboxCensusRequest{StartId: -1, Operator: "alice"})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.RequestMailboxCensus(as(t, "viewer"), &controlv1.RequestMailboxCensusRequest{StartId: 1, Operator: "v"})
	requireCode(t, codes.PermissionDenied, err)
	_, err = client.GetMailboxCensus(as(t, "viewer"), &controlv1.GetMailboxCensusRequest{Id: 999})
	requireCode(t, codes.NotFound, err)
	_, err = client.GetMailboxCensus(as(t, "viewer"), &controlv1.GetMailboxCensusRequest{})
	requireCode(t, codes.InvalidArgument, err)
}
