package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// TestReplay_R_F1_R_F3_ServedAndGuarded: ReplayService is served by the
// control plane behind the same token check as every other call (R-F3),
// and with the token a replay is previewed, recorded and read back.
func TestReplay_R_F1_R_F3_ServedAndGuarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO proc_state (msg_id, state, error_class, reason, raw, kafka_offset, finished_at)
		VALUES (42, 'DEAD', 'CODEC_ERROR', 'bad STOT', '<MSG/>', 7, $1)`, testNow.Add(-time.Hour))
	client := controlv1.NewReplayServiceClient(b.conn)
	sel := &controlv1.ReplaySelector{MsgIds: []int64{42}}

	t.Run("EveryMethodRefusesWithoutToken", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client.Preview(ctx, &controlv1.PreviewReplayRequest{Selector: sel})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.Execute(ctx, &controlv1.ExecuteReplayRequest{Selector: sel, Operator: "o", Reason: "r"})
		requireCode(t, codes.Unauthenticated, err)
		_, err = client.GetReplayRequest(ctx, &controlv1.GetReplayRequestRequest{Id: 1})
		requireCode(t, codes.Unauthenticated, err)
	})
	t.Run("PreviewExecuteStatusWithToken", func(t *testing.T) {
		pre, err := client.Preview(callCtx(t), &controlv1.PreviewReplayRequest{Selector: sel})
		require.NoError(t, err)
		require.Equal(t, int64(1), pre.GetReplayableCount())
		ex, err := client.Execute(callCtx(t), &controlv1.ExecuteReplayRequest{Selector: sel, Operator: "alice", Reason: "codec fixed"})
		require.NoError(t, err)
		got, err := client.GetReplayRequest(callCtx(t), &controlv1.GetReplayRequestRequest{Id: ex.GetRequest().GetId()})
		require.NoError(t, err)
		require.Equal(t, controlv1.ReplayRequestState_REPLAY_REQUEST_STATE_PENDING, got.GetRequest().GetState())
		require.Equal(t, []int64{42}, got.GetRequest().GetMsgIds())
	})
}
