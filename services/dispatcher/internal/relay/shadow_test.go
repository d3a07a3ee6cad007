package relay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/sisrequest"
)

// TestShadow_R_L6_R_D5_SettlesMarkersAndRequestsUnwritten: in shadow mode
// the marker and coutmsgs loops settle every row without a MySQL write —
// the mailbox row keeps no marker, COUTMSGS stays empty — and leave nothing
// pending: the intent is SENT with outcome shadowed and finishes its
// message's backfill (so the record cleanup and the self-check treat it as
// done), the request is closed EXPIRED so nothing waits for its answer
// (R-L6, PRE-1). Without shadow mode the same rows are written (R-D4, R-D5).
func TestShadow_R_L6_R_D5_SettlesMarkersAndRequestsUnwritten(t *testing.T) {
	t.Parallel()
	for _, shadow := range []bool{true, false} {
		t.Run(map[bool]string{true: "Shadow", false: "Live"}[shadow], func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(o *Options) { o.Shadow = shadow })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			msgID := b.insertMailbox(t, time.Time{}, "VALID")
			intent := b.addIntent(t, msgID)
			reqID, reqRow := b.registerRequest(t, sisrequest.TypeRQRD, 1)

			_, err := b.r.DrainMailbox(ctx)
			require.NoError(t, err)
			_, err = b.r.DrainCoutmsgs(ctx)
			require.NoError(t, err)

			processed, status := b.marker(t, msgID)
			var pending int
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state='PENDING'`).Scan(&pending))
			require.Zero(t, pending, "nothing waits for a write")
			require.NotNil(t, b.backfilledAt(t, msgID), "the backfill is finished")
			var outcome string
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT backfill_outcome FROM proc_state WHERE msg_id=$1`, msgID).Scan(&outcome))
			if shadow {
				require.False(t, processed.Valid, "shadow mode never writes a marker")
				require.Equal(t, "VALID", status)
				row := b.row(t, intent)
				require.Equal(t, "SENT", row.State)
				require.Equal(t, OutcomeShadowed, row.Outcome)
				require.Equal(t, OutcomeShadowed, outcome)
				require.Empty(t, b.coutRows(t), "shadow mode never writes COUTMSGS")
				r := b.request(t, reqID)
				require.Equal(t, "EXPIRED", r.State)
				require.Equal(t, shadowReason, *r.ClosedReason)
				require.Equal(t, OutcomeShadowed, b.coutOutbox(t, reqRow).Outcome)
				return
			}
			require.True(t, processed.Valid)
			require.Equal(t, "PROCESSED", status)
			require.Equal(t, OutcomeWritten, outcome)
			require.Len(t, b.coutRows(t), 1)
			require.Equal(t, "SENT", b.request(t, reqID).State)
		})
	}
}
