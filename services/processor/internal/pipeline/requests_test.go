package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
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

// logCapture keeps the engine's log lines for assertions and still shows
// them in the test log.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
	t   *testing.T
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t.Log(strings.TrimRight(string(p), "\n"))
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func withLogCapture(t *testing.T) (*logCapture, func(*Options)) {
	c := &logCapture{t: t}
	return c, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// TestRequests_R_C7_G_RESP_GUARD_ExactEchoMatch: an SCHD RESP echoing an
// open RQFD request's window is applied as a snapshot (like DNLD) and
// closes exactly that request DONE with the response, in the same
// transaction; another open window stays open.
func TestRequests_R_C7_G_RESP_GUARD_ExactEchoMatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
	want := h.addRequest("RQFD", "20210123..20210123", "WAITING", t0)
	other := h.addRequest("RQFD", "20210124..20210124", "WAITING", t0)
	h.clk.Advance(10 * time.Second)

	h.runReceived(2, schdResp(2, dttm(5*time.Second), "<STDB>20210123</STDB><STDE>20210123</STDE>", fltr(15, day23, "<STND>505</STND>")), t0.Add(6*time.Second))

	p := h.proc(2)
	require.Equal(t, StateApplied, p.State, p.Reason)
	require.Equal(t, fmt.Sprintf("snapshot: 1 records, 1 changed, 1 deleted, 1 days; answers RQFD request %d (exact match)", want), p.Reason)
	require.Equal(t, "505", h.flight(15).Doc["STND"])
	require.Equal(t, "DELETED", h.flight(16).State, "applied exactly like a DNLD snapshot")
	r := h.reqRow(want)
	require.Equal(t, "DONE", r.State)
	require.Equal(t, "exact", r.MatchKind)
	require.Equal(t, int64(2), r.ResponseMsgID)
	require.True(t, r.ClosedAt.Equal(t0.Add(10*time.Second)))
	require.Equal(t, "answered by message 2 (exact match)", r.ClosedReason)
	require.Equal(t, "WAITING", h.reqRow(other).State)
}

// TestRequests_R_C7_C_23_FallbackMatchIsRecordedAndLogged: without an echo
// the RESP answers the oldest open RQFD request sent no later than its DTTM
// (compared in the airport zone at whole seconds); the match is recorded as
// fallback and logged for audit.
//
// Validation 001§6 and 002§8 "请求超时、无匹配 RESP、时间单位不一致".
func TestRequests_R_C7_C_23_FallbackMatchIsRecordedAndLogged(t *testing.T) {
	t.Parallel()
	logs, capture := withLogCapture(t)
	h := newHarness(t, capture)
	first := h.addRequest("RQFD", "a..b", "SENT", t0.Add(500*time.Millisecond)) // same second as the DTTM
	second := h.addRequest("RQFD", "c..d", "WAITING", t0.Add(-5*time.Second))
	later := h.addRequest("RQFD", "e..f", "WAITING", t0.Add(2*time.Second)) // sent after the DTTM
	h.clk.Advance(3 * time.Second)

	h.runReceived(1, schdResp(1, dttm(0), "", fltr(15, day23)), t0.Add(3*time.Second))
	p := h.proc(1)
	require.Equal(t, StateApplied, p.State, p.Reason)
	require.Contains(t, p.Reason, fmt.Sprintf("answers RQFD request %d (fallback match)", second), "the oldest eligible one")
	r := h.reqRow(second)
	require.Equal(t, "DONE", r.State)
	require.Equal(t, "fallback", r.MatchKind)
	require.Equal(t, int64(1), r.ResponseMsgID)
	require.Contains(t, logs.String(), "response matched by fallback")
	require.Contains(t, logs.String(), "audit=request-fallback-match")
	require.Contains(t, logs.String(), fmt.Sprintf("request_id=%d", second))
	require.Contains(t, logs.String(), "candidates=2")

	h.runReceived(2, schdResp(2, dttm(0), "", fltr(15, day23)), t0.Add(3*time.Second))
	require.Equal(t, StateSucceeded, h.state(2), "an unchanged snapshot changes no flight")
	require.Contains(t, h.proc(2).Reason, fmt.Sprintf("answers RQFD request %d (fallback match)", first))
	require.Equal(t, "DONE", h.reqRow(first).State, "sent in the DTTM's second: DTTM ≥ sent_at at whole seconds")
	require.Equal(t, "WAITING", h.reqRow(later).State)

	h.runReceived(3, schdResp(3, dttm(0), "", fltr(15, day23)), t0.Add(3*time.Second))
	p = h.proc(3)
	require.Equal(t, StateSkipped, p.State)
	require.Equal(t, "SCHD RESP without a matching open RQFD request: every open request was sent after the response's DTTM "+dttm(0), p.Reason)
	require.Equal(t, "WAITING", h.reqRow(later).State)
}

// TestRequests_R_C7_G_RESP_GUARD_NonMatchingRESPIsSkippedWithReason: a RESP
// that answers no open RQFD request is SKIPPED with the reason, writes no
// flight and changes no request.
//
// Validation 001§6 and 002§8 "请求超时、无匹配 RESP、时间单位不一致".
func TestRequests_R_C7_G_RESP_GUARD_NonMatchingRESPIsSkippedWithReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		requests func(h *harness) []int64
		resp     string
		received time.Duration
		reason   string
	}{
		{"NothingOpen", func(h *harness) []int64 { return nil },
			schdResp(1, dttm(10*time.Second), "", fltr(15, day23)), 11 * time.Second, "no RQFD request is open"},
		{"OnlyRegisteredNotSent", func(h *harness) []int64 { return []int64{h.addRequest("RQFD", "a..b", "REGISTERED", t0)} },
			schdResp(1, dttm(10*time.Second), "", fltr(15, day23)), 11 * time.Second, "no RQFD request is open"},
		{"OnlyRQRDOpen", func(h *harness) []int64 { return []int64{h.addRequest("RQRD", "GLST", "WAITING", t0)} },
			schdResp(1, dttm(10*time.Second), "", fltr(15, day23)), 11 * time.Second, "no RQFD request is open"},
		{"EchoOfAnotherWindow", func(h *harness) []int64 { return []int64{h.addRequest("RQFD", "a..b", "WAITING", t0)} },
			schdResp(1, dttm(10*time.Second), "<STDB>a</STDB><STDE>c</STDE>", fltr(15, day23)), 11 * time.Second,
			"echoed window a..c matches none of the 1 open RQFD requests"},
		{"EchoButArrivedAfterDeadline", func(h *harness) []int64 { return []int64{h.addRequest("RQFD", "a..b", "WAITING", t0)} },
			schdResp(1, dttm(10*time.Second), "<STDB>a</STDB><STDE>b</STDE>", fltr(15, day23)), 61 * time.Second,
			"after its deadline 2021-01-23 08:01:00"},
		{"DTTMBeforeSending", func(h *harness) []int64 { return []int64{h.addRequest("RQFD", "a..b", "WAITING", t0)} },
			schdResp(1, dttm(-time.Second), "", fltr(15, day23)), 11 * time.Second, "every open request was sent after the response's DTTM 20210123075959"},
		{"FallbackArrivedAfterDeadline", func(h *harness) []int64 { return []int64{h.addRequest("RQFD", "a..b", "WAITING", t0)} },
			schdResp(1, dttm(10*time.Second), "", fltr(15, day23)), 60*time.Second + time.Millisecond, "after the deadline of every open request"},
		{"NoDTTM", func(h *harness) []int64 { return []int64{h.addRequest("RQFD", "a..b", "WAITING", t0)} },
			schdResp(1, "", "", fltr(15, day23)), 11 * time.Second, "no echo and DTTM \"\": want yyyyMMddHHmmss"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			ids := tc.requests(h)
			before := map[int64]reqRow{}
			for _, id := range ids {
				before[id] = h.reqRow(id)
			}
			h.clk.Advance(tc.received)
			h.runReceived(1, tc.resp, t0.Add(tc.received))
			p := h.proc(1)
			require.Equal(t, StateSkipped, p.State, p.Reason)
			require.True(t, strings.HasPrefix(p.Reason, "SCHD RESP without a matching open RQFD request: "), p.Reason)
			require.Contains(t, p.Reason, tc.reason)
			require.Zero(t, h.count(`SELECT count(*) FROM flight`))
			require.Equal(t, 1, h.mailboxRows(1), "terminal with its backfill intent")
			for _, id := range ids {
				require.Equal(t, before[id], h.reqRow(id), "request unchanged")
			}
		})
	}
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

// TestRequests_R_C10_R_D5_ReferenceRESPClosesMatchingRQRD: a reference RESP
// is applied as R-C10 says in every case (it replaces its type), and in the
// same transaction closes the open RQRD request of the same RTYP (fallback
// match: the RESP carries no echo). Without a request it is applied alone.
func TestRequests_R_C10_R_D5_ReferenceRESPClosesMatchingRQRD(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	gates := h.addRequest("RQRD", "GLST", "WAITING", t0)
	stands := h.addRequest("RQRD", "SLST", "WAITING", t0)
	h.clk.Advance(5 * time.Second)
	h.runReceived(1, refResp(1, "GLST", dttm(4*time.Second), glst("A", "a"), glst("B", "b")), h.clk.Now())
	p := h.proc(1)
	require.Equal(t, StateSucceeded, p.State, p.Reason)
	require.Equal(t, fmt.Sprintf("GLST RESP: 2 records; answers RQRD request %d (fallback match)", gates), p.Reason)
	require.Equal(t, []string{"A", "B"}, h.refKeys("GLST"))
	r := h.reqRow(gates)
	require.Equal(t, "DONE", r.State)
	require.Equal(t, "fallback", r.MatchKind)
	require.Equal(t, int64(1), r.ResponseMsgID)
	require.Equal(t, "WAITING", h.reqRow(stands).State, "another type's request stays open")

	// Unsolicited: applied, nothing closed.
	h.runReceived(2, refResp(2, "GLST", dttm(5*time.Second), glst("C", "c")), h.clk.Now())
	p = h.proc(2)
	require.Equal(t, StateSucceeded, p.State)
	require.Equal(t, "GLST RESP: 1 records", p.Reason)
	require.Equal(t, []string{"C"}, h.refKeys("GLST"))
	require.Equal(t, int64(1), h.reqRow(gates).ResponseMsgID, "a closed request keeps its answer")

	// Sent after the RESP was created: applied, the request stays open.
	late := h.addRequest("RQRD", "ABDG", "WAITING", h.clk.Now())
	h.runReceived(3, refResp(3, "ABDG", dttm(0), "<ABDG><ABCD>X</ABCD></ABDG>"), h.clk.Now())
	require.Equal(t, "ABDG RESP: 1 records", h.proc(3).Reason)
	require.Equal(t, "WAITING", h.reqRow(late).State)
}

// TestRequests_R_C7_RejectedResponseLeavesRequestOpen: a matching RESP whose
// snapshot is refused (DEAD(PROTOCOL)) writes nothing, and its request
// stays open: completion only follows successful processing.
//
// Validation 001§6 and 002§8 "请求超时、无匹配 RESP、时间单位不一致".
func TestRequests_R_C7_RejectedResponseLeavesRequestOpen(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.addRequest("RQFD", "a..b", "WAITING", t0)
	h.clk.Advance(time.Second)
	bad := sistest.EnvelopeAt(1, "SCHD", "RESP", dttm(time.Second), "<SCHD><RECS>2</RECS>"+fltr(15, day23)+"</SCHD>")
	h.runReceived(1, bad, h.clk.Now())
	p := h.proc(1)
	require.Equal(t, StateDead, p.State)
	require.Equal(t, ClassProtocol, p.ErrorClass)
	require.Equal(t, "WAITING", h.reqRow(id).State)
	require.Zero(t, h.count(`SELECT count(*) FROM flight`))
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
