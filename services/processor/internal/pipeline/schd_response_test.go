package pipeline

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/services/processor/internal/sistest"
)

// insertReceived registers a message that reached the mailbox at received,
// without executing it.
func (h *harness) insertReceived(id int64, raw string, received time.Time) {
	h.t.Helper()
	h.insertRecords(&kgo.Record{Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(raw),
		Headers: []kgo.RecordHeader{{Key: "msgx-received-at", Value: []byte(received.Format(time.RFC3339Nano))}}})
}

// respWindow is the echoed window of the RESP in these tests.
const respWindow = sistest.Window23

// storedMatch is the request match kept with a message's snapshot progress.
func (h *harness) storedMatch(id int64) (int64, string) {
	h.t.Helper()
	var req int64
	var kind string
	require.Equal(h.t, 1, h.count(`SELECT count(*) FROM snapshot_progress WHERE msg_id=$1 AND request_id IS NOT NULL`, id))
	require.NoError(h.t, h.pool.QueryRow(h.t.Context(), `SELECT request_id, match_kind FROM snapshot_progress WHERE msg_id=$1`, id).Scan(&req, &kind))
	return req, kind
}

// TestSchd_R_C6_R_C7_ReplayedRESPFinishesUnderItsStoredMatch: a RESP that
// went DEAD(EXHAUSTED) half written, whose request then expired, is
// replayed: the replayed run starts from the first record (the progress
// counters belong to the earlier run) but keeps the match of the first
// batch, so the package is applied in full instead of SKIPPED, without
// bumping the flights the earlier run wrote (INV-20b).
func TestSchd_R_C6_R_C7_ReplayedRESPFinishesUnderItsStoredMatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, batchOf2)
	req := h.addRequest("RQFD", "23JAN21..23JAN21", "WAITING", t0)
	h.insertReceived(1, schdResp(1, dttm(5*time.Second), respWindow, fltrs(15, 19)...), t0.Add(5*time.Second))
	h.step()
	gotReq, kind := h.storedMatch(1)
	require.Equal(t, req, gotReq, "the first batch's match is stored with its progress")
	require.Equal(t, MatchExact, kind)
	require.Equal(t, "WAITING", h.reqRow(req).State, "closed only with the whole package")
	h.exec(`ALTER TABLE projection_pending RENAME TO projection_pending_away`)
	h.exhaust(1)
	require.Equal(t, ClassExhausted, h.proc(1).ErrorClass)
	h.exec(`ALTER TABLE projection_pending_away RENAME TO projection_pending`)
	h.clk.Set(t0.Add(10 * time.Minute))
	require.EqualValues(t, 1, h.sweep().Expired, "no open message protects the request any more")
	require.Equal(t, "EXPIRED", h.reqRow(req).State)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM flight`))

	h.requestReplay(1)
	h.drain()
	r := h.proc(1)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Contains(t, r.Reason, "snapshot: 5 records, 3 changed, 0 deleted, 1 days, 3 batches; answers RQFD request "+
		strconv.FormatInt(req, 10)+" (exact match), which was closed meanwhile (EXPIRED: timeout)")
	require.Equal(t, 5, h.count(`SELECT count(*) FROM flight WHERE state_version=1`))
	require.Equal(t, "EXPIRED", h.reqRow(req).State)
}

// TestSchd_R_C7_OneBatchRESPClosesItsRequestInTheSameStep: a RESP that
// fits one batch matches and closes its request in the step that writes
// it; nothing is stored.
func TestSchd_R_C7_OneBatchRESPClosesItsRequestInTheSameStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	req := h.addRequest("RQFD", "23JAN21..23JAN21", "WAITING", t0)
	h.clk.Advance(10 * time.Second)
	h.runReceived(1, schdResp(1, dttm(5*time.Second), respWindow, fltrs(15, 16)...), t0.Add(5*time.Second))
	r := h.proc(1)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "snapshot: 2 records, 2 changed, 0 deleted, 1 days; answers RQFD request "+strconv.FormatInt(req, 10)+" (exact match)", r.Reason)
	q := h.reqRow(req)
	require.Equal(t, "DONE", q.State)
	require.Equal(t, int64(1), q.ResponseMsgID)
	require.Equal(t, MatchExact, q.MatchKind)
	require.Equal(t, "answered by message 1 (exact match)", q.ClosedReason)
	require.True(t, q.ClosedAt.Equal(t0.Add(10*time.Second)), "closed when the response was written: %s", q.ClosedAt)
	require.Zero(t, h.count(`SELECT count(*) FROM snapshot_progress`))
}
