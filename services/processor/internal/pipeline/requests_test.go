package pipeline

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/libs/lifecycle"
	"msgexchange/services/processor/internal/sistest"
)

// Requests in these tests are sent at t0 (08:00:00 airport time) unless a
// test says otherwise; dttm(d) is the DTTM of t0+d in the airport zone.
var (
	dttm     = sistest.DTTM
	schdResp = sistest.SCHDResp
	refResp  = sistest.RefResp
)

// addRequest writes a request in state as the control plane and the
// dispatcher leave it. scope is "STDB..STDE" for RQFD and the RTYP for RQRD;
// sentAt is ignored for REGISTERED.
func (h *harness) addRequest(typ, scope, state string, sentAt time.Time) int64 {
	h.t.Helper()
	var stdb, stde, rtyp, sent, timeout, closed any
	if typ == "RQFD" {
		parts := strings.SplitN(scope, "..", 2)
		stdb, stde = parts[0], parts[1]
	} else {
		rtyp = scope
	}
	if state != "REGISTERED" {
		sent = sentAt
	}
	if state == "WAITING" {
		d := 60 * time.Second
		if typ == "RQRD" {
			d = 30 * time.Second
		}
		timeout = sentAt.Add(d)
	}
	if state == "EXPIRED" {
		closed = sentAt
	}
	var id int64
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `
		INSERT INTO req_track (type, stdb, stde, rtyp, sender, seqn, state, outbound_id, xml, operator, reason, registered_at, sent_at, timeout_at, closed_at, closed_reason)
		VALUES ($1, $2, $3, $4, 'VIEW', '000001', $5, CASE WHEN $6::timestamptz IS NULL THEN NULL ELSE 1 END, '<MSG/>', 'ops', 'test', $7, $6, $8, $9,
		        CASE WHEN $5 = 'EXPIRED' THEN 'timeout' END)
		RETURNING id`, typ, stdb, stde, rtyp, state, sent, sentAt.Add(-time.Second), timeout, closed).Scan(&id))
	return id
}

// reqRow is a req_track row as these tests check it.
type reqRow struct {
	State, MatchKind, ClosedReason string
	ResponseMsgID                  int64
	TimeoutAt, ClosedAt            *time.Time
}

func (h *harness) reqRow(id int64) reqRow {
	h.t.Helper()
	var r reqRow
	err := h.pool.QueryRow(context.Background(), `
		SELECT state, COALESCE(match_kind, ''), COALESCE(closed_reason, ''), COALESCE(response_msg_id, 0), timeout_at, closed_at
		FROM req_track WHERE id=$1`, id).Scan(&r.State, &r.MatchKind, &r.ClosedReason, &r.ResponseMsgID, &r.TimeoutAt, &r.ClosedAt)
	require.NoError(h.t, err, "req_track %d", id)
	return r
}

// runReceived registers a message that reached the mailbox at received and
// drains the executor.
func (h *harness) runReceived(id int64, raw string, received time.Time) {
	h.t.Helper()
	h.insertRecords(&kgo.Record{Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(raw),
		Headers: []kgo.RecordHeader{{Key: "msgx-received-at", Value: []byte(received.Format(time.RFC3339Nano))}}})
	h.drain()
}

func (h *harness) sweep() SweepResult {
	h.t.Helper()
	res, err := h.e.SweepRequests(context.Background())
	require.NoError(h.t, err)
	return res
}

// TestRequests_R_D5_LateResponseNeverChangesAClosedRequest: after a request
// expired (timeout) or was answered, a later RESP finds no open request: it
// is SKIPPED and the closed request keeps its state, time and response.
//
// Validation 001§6 and 002§8 "请求超时、无匹配 RESP、时间单位不一致".
func TestRequests_R_D5_LateResponseNeverChangesAClosedRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	expired := h.addRequest("RQFD", "a..b", "SENT", t0)
	h.sweep()
	h.clk.Advance(60 * time.Second)
	require.Equal(t, SweepResult{Expired: 1}, h.sweep())
	closedExpired := h.reqRow(expired)
	require.Equal(t, "EXPIRED", closedExpired.State)

	h.clk.Advance(time.Second)
	h.runReceived(1, schdResp(1, dttm(30*time.Second), "<STDB>a</STDB><STDE>b</STDE>", fltr(15, day23)), t0.Add(61*time.Second))
	require.Equal(t, StateSkipped, h.state(1))
	require.Contains(t, h.proc(1).Reason, "no RQFD request is open")
	require.Equal(t, closedExpired, h.reqRow(expired))

	done := h.addRequest("RQFD", "c..d", "WAITING", h.clk.Now())
	h.clk.Advance(time.Second)
	h.runReceived(2, schdResp(2, dttm(62*time.Second), "", fltr(15, day23)), h.clk.Now())
	require.Equal(t, StateApplied, h.state(2))
	answered := h.reqRow(done)
	require.Equal(t, "DONE", answered.State)

	h.clk.Advance(time.Second)
	h.runReceived(3, schdResp(3, dttm(63*time.Second), "<STDB>c</STDB><STDE>d</STDE>", fltr(16, day23)), h.clk.Now())
	require.Equal(t, StateSkipped, h.state(3))
	require.Equal(t, answered, h.reqRow(done), "still answered by message 2")
	require.Zero(t, h.count(`SELECT count(*) FROM flight WHERE flid=16`))
	h.sweep()
	require.Equal(t, answered, h.reqRow(done), "the timer never touches a closed request")
}

// TestRequests_R_D5_G_REQ_TRACK_TimeoutExpiresWaitingRequests: the sweep
// arms SENT requests (WAITING, timeout_at = sent_at + 60 s for RQFD, 30 s
// for RQRD, configurable) and expires them once the injected clock passes
// timeout_at, with closed_reason "timeout".
//
// Validation 001§6 and 002§8 "请求超时、无匹配 RESP、时间单位不一致".
func TestRequests_R_D5_G_REQ_TRACK_TimeoutExpiresWaitingRequests(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		rqfd := h.addRequest("RQFD", "a..b", "SENT", t0)
		rqrd := h.addRequest("RQRD", "GLST", "SENT", t0)
		registered := h.addRequest("RQRD", "SLST", "REGISTERED", t0)
		require.Equal(t, SweepResult{Armed: 2}, h.sweep())
		require.Equal(t, "WAITING", h.reqRow(rqfd).State)
		require.True(t, h.reqRow(rqfd).TimeoutAt.Equal(t0.Add(60*time.Second)))
		require.True(t, h.reqRow(rqrd).TimeoutAt.Equal(t0.Add(30*time.Second)))

		h.clk.Advance(30*time.Second - time.Millisecond)
		require.Equal(t, SweepResult{}, h.sweep())
		h.clk.Advance(time.Millisecond)
		require.Equal(t, SweepResult{Expired: 1}, h.sweep())
		r := h.reqRow(rqrd)
		require.Equal(t, "EXPIRED", r.State)
		require.Equal(t, "timeout", r.ClosedReason)
		require.True(t, r.ClosedAt.Equal(t0.Add(30*time.Second)))
		require.Equal(t, "WAITING", h.reqRow(rqfd).State)

		h.clk.Advance(30 * time.Second)
		require.Equal(t, SweepResult{Expired: 1}, h.sweep())
		require.Equal(t, "EXPIRED", h.reqRow(rqfd).State)
		require.Equal(t, "REGISTERED", h.reqRow(registered).State, "no timer before it is sent")
	})
	t.Run("Configured", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(o *Options) { o.RQFDTimeout, o.RQRDTimeout = 5*time.Second, 2*time.Second })
		rqfd := h.addRequest("RQFD", "a..b", "SENT", t0)
		rqrd := h.addRequest("RQRD", "GLST", "SENT", t0)
		h.clk.Advance(2 * time.Second)
		require.Equal(t, SweepResult{Armed: 2, Expired: 1}, h.sweep(), "armed and expired in one sweep")
		require.Equal(t, "EXPIRED", h.reqRow(rqrd).State)
		require.True(t, h.reqRow(rqfd).TimeoutAt.Equal(t0.Add(5*time.Second)))
	})
}

// TestRequests_R_D5_AnswerWaitingInTheBacklogIsNotLost: a response that
// reached the mailbox before the deadline but waits behind other messages
// keeps its request open past the deadline, and answers it when executed;
// one that arrived after the deadline does not.
//
// Validation 001§6 and 002§8 "请求超时、无匹配 RESP、时间单位不一致".
func TestRequests_R_D5_AnswerWaitingInTheBacklogIsNotLost(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.addRequest("RQRD", "GLST", "SENT", t0)
	h.sweep()
	h.clk.Advance(20 * time.Second)
	h.insertRecords(&kgo.Record{Key: []byte("1"), Value: []byte(refResp(1, "GLST", dttm(15*time.Second), glst("A", "a"))),
		Headers: []kgo.RecordHeader{{Key: "msgx-received-at", Value: []byte(t0.Add(20 * time.Second).Format(time.RFC3339))}}})
	h.clk.Advance(time.Minute) // the processor is busy; the deadline passes
	require.Equal(t, SweepResult{}, h.sweep(), "a message received by the deadline is still waiting")
	require.Equal(t, "WAITING", h.reqRow(id).State)

	h.drain()
	require.Equal(t, StateSucceeded, h.state(1))
	require.Equal(t, "DONE", h.reqRow(id).State)
	require.Equal(t, int64(1), h.reqRow(id).ResponseMsgID)
}

// TestRequests_G_REQ_TRACK_RETENTION_PurgesClosedRequestsAfterRetention:
// DONE and EXPIRED requests are deleted once closed longer than
// request.retention (default 7 days); open and younger ones stay.
func TestRequests_G_REQ_TRACK_RETENTION_PurgesClosedRequestsAfterRetention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		retention time.Duration
		want      time.Duration
	}{{"Default7Days", 0, 7 * 24 * time.Hour}, {"Configured", time.Hour, time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.RequestRetention = tc.retention })
			oldExpired := h.addRequest("RQFD", "a..b", "EXPIRED", t0)
			oldDone := h.addRequest("RQRD", "GLST", "WAITING", t0)
			h.exec(`UPDATE req_track SET state='DONE', closed_at=$2, response_msg_id=9, match_kind='fallback' WHERE id=$1`, oldDone, t0)
			young := h.addRequest("RQRD", "SLST", "EXPIRED", t0.Add(tc.want/2))
			open := h.addRequest("RQRD", "ABDG", "REGISTERED", t0)

			h.clk.Set(t0.Add(tc.want))
			require.Equal(t, SweepResult{}, h.sweep(), "not older than the retention yet")
			h.clk.Advance(time.Millisecond)
			require.Equal(t, SweepResult{Purged: 2}, h.sweep())
			require.Zero(t, h.count(`SELECT count(*) FROM req_track WHERE id = ANY($1)`, []int64{oldExpired, oldDone}))
			require.Equal(t, "EXPIRED", h.reqRow(young).State)
			require.Equal(t, "REGISTERED", h.reqRow(open).State)
		})
	}
}

// TestRequests_R_D5_SweepLoopRunsAsService: processor-requests is one of
// the engine's loops and sweeps on its own.
func TestRequests_R_D5_SweepLoopRunsAsService(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.RequestSweepInterval = 10 * time.Millisecond })
	var names []string
	for _, s := range h.e.Services() {
		names = append(names, s.Name())
	}
	require.Contains(t, names, "processor-requests")

	id := h.addRequest("RQRD", "GLST", "SENT", t0)
	m := lifecycle.NewManager(h.e.log, h.e.requestsService())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.Eventually(t, func() bool { return h.reqRow(id).State == "WAITING" }, 10*time.Second, 5*time.Millisecond)
	h.clk.Advance(30 * time.Second)
	require.Eventually(t, func() bool { return h.reqRow(id).State == "EXPIRED" }, 10*time.Second, 5*time.Millisecond)
}
