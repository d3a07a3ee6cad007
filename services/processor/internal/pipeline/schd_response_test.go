package pipeline

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// insertReceived registers a message that reached the mailbox at received,
// without executing it.
func (h *harness) insertReceived(id int64, raw string, received time.Time) {
	h.t.Helper()
	h.insertRecords(&kgo.Record{Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(raw),
		Headers: []kgo.RecordHeader{{Key: "msgx-received-at", Value: []byte(received.Format(time.RFC3339Nano))}}})
}

// respWindow is the echoed window of the RESP in these tests.
const respWindow = "<STDB>23JAN21</STDB><STDE>23JAN21</STDE>"

// storedMatch is the request match kept with a message's snapshot progress.
func (h *harness) storedMatch(id int64) (int64, string) {
	h.t.Helper()
	var req int64
	var kind string
	require.Equal(h.t, 1, h.count(`SELECT count(*) FROM snapshot_progress WHERE msg_id=$1 AND request_id IS NOT NULL`, id))
	require.NoError(h.t, h.pool.QueryRow(h.t.Context(), `SELECT request_id, match_kind FROM snapshot_progress WHERE msg_id=$1`, id).Scan(&req, &kind))
	return req, kind
}

// TestSchd_R_C6_R_C7_RESPMatchedOnceAtItsFirstBatch: an SCHD RESP written
// in several batches is matched to its RQFD request by the step that
// writes the first batch, and the match is stored with the progress. The
// request expiring between batches does not make the rest of the package
// SKIPPED: every batch is written and the message finishes; the request
// stays EXPIRED, untouched (a late answer never changes a closed request),
// and the reason says so.
func TestSchd_R_C6_R_C7_RESPMatchedOnceAtItsFirstBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, batchOf2)
	req := h.addRequest("RQFD", "23JAN21..23JAN21", "WAITING", t0)
	h.insertReceived(1, schdResp(1, dttm(5*time.Second), respWindow, fltrs(15, 19)...), t0.Add(5*time.Second))

	h.step()
	r := h.proc(1)
	require.Equal(t, StatePending, r.State, r.Reason)
	require.Equal(t, "snapshot in progress: 2 of 5 records written, 2 changed, 0 deleted, 1 batches committed; answers RQFD request "+
		strconv.FormatInt(req, 10)+" (exact match)", r.Reason)
	gotReq, kind := h.storedMatch(1)
	require.Equal(t, req, gotReq)
	require.Equal(t, MatchExact, kind)
	require.Equal(t, "WAITING", h.reqRow(req).State, "closed only with the whole package")

	// Closed between batches: by its timeout here; superseding and an
	// operator close it the same way.
	h.exec(`UPDATE req_track SET state='EXPIRED', closed_at=$2, closed_reason='timeout' WHERE id=$1`, req, t0.Add(time.Minute))
	before := h.reqRow(req)
	h.drain()
	r = h.proc(1)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "snapshot: 5 records, 5 changed, 0 deleted, 1 days, 3 batches; answers RQFD request "+strconv.FormatInt(req, 10)+
		" (exact match), which was closed meanwhile (EXPIRED: timeout) and stays closed", r.Reason)
	require.Equal(t, 5, h.count(`SELECT count(*) FROM flight WHERE flid BETWEEN 15 AND 19 AND state='ACTIVE'`))
	require.Equal(t, before, h.reqRow(req), "the closed request is not changed")
	require.Zero(t, h.count(`SELECT count(*) FROM snapshot_progress`))
}

// TestSchd_R_C7_RESPContinuesUnderItsMatchNotANewerRequest: a request
// superseded between batches by a newer one of the same window leaves the
// package answering the request it matched at its first batch: the later
// batches do not match again, so the newer request stays open for its own
// answer.
func TestSchd_R_C7_RESPContinuesUnderItsMatchNotANewerRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, batchOf2)
	old := h.addRequest("RQFD", "23JAN21..23JAN21", "WAITING", t0)
	h.insertReceived(1, schdResp(1, dttm(5*time.Second), respWindow, fltrs(15, 17)...), t0.Add(5*time.Second))
	h.step()
	require.Equal(t, StatePending, h.state(1))

	h.exec(`UPDATE req_track SET state='EXPIRED', closed_at=$2, closed_reason='superseded by a newer request' WHERE id=$1`, old, t0.Add(6*time.Second))
	newer := h.addRequest("RQFD", "23JAN21..23JAN21", "WAITING", t0.Add(6*time.Second))
	h.drain()
	r := h.proc(1)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Contains(t, r.Reason, "answers RQFD request "+strconv.FormatInt(old, 10)+" (exact match), which was closed meanwhile (EXPIRED: superseded by a newer request)")
	require.Equal(t, "EXPIRED", h.reqRow(old).State)
	n := h.reqRow(newer)
	require.Equal(t, "WAITING", n.State, "the newer request still waits for its own answer")
	require.Zero(t, n.ResponseMsgID)
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
	h.runReceived(1, schdResp(1, dttm(5*time.Second), respWindow, fltrs(15, 16)...), t0.Add(5*time.Second))
	r := h.proc(1)
	require.Equal(t, StateApplied, r.State, r.Reason)
	require.Equal(t, "snapshot: 2 records, 2 changed, 0 deleted, 1 days; answers RQFD request "+strconv.FormatInt(req, 10)+" (exact match)", r.Reason)
	q := h.reqRow(req)
	require.Equal(t, "DONE", q.State)
	require.Equal(t, int64(1), q.ResponseMsgID)
	require.Zero(t, h.count(`SELECT count(*) FROM snapshot_progress`))
}
