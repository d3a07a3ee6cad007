package decide

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/sistest"
)

// tracked is a request as req_track keeps it.
type tracked struct {
	Request
	Type, RTYP          string
	State, ClosedReason string
}

// requestStore is a RequestView and RequestSink over tracked requests, as
// apply.Requests reads and writes req_track: the open requests are the
// SENT and WAITING ones of a type (and RTYP), oldest sent first; a close
// makes one DONE.
type requestStore struct {
	reqs     []*tracked
	received time.Time
	closes   []RequestClose
}

// add tracks a request in state as the control plane and the dispatcher
// leave it, sent at sentAt with the default timeout (60 s for RQFD, 30 s
// for RQRD), and returns its ID. scope is "STDB..STDE" for RQFD and the
// RTYP for RQRD.
func (s *requestStore) add(typ, scope, state string, sentAt time.Time) int64 {
	r := &tracked{Request: Request{ID: int64(len(s.reqs) + 1), SentAt: sentAt, Deadline: sentAt.Add(30 * time.Second)},
		Type: typ, State: state}
	if typ == "RQFD" {
		r.STDB, r.STDE, _ = strings.Cut(scope, "..")
		r.Deadline = sentAt.Add(60 * time.Second)
	} else {
		r.RTYP = scope
	}
	s.reqs = append(s.reqs, r)
	return r.ID
}

// get returns request id; the test fails without one.
func (s *requestStore) get(t *testing.T, id int64) tracked {
	t.Helper()
	for _, r := range s.reqs {
		if r.ID == id {
			return *r
		}
	}
	t.Fatalf("request %d is not tracked", id)
	return tracked{}
}

// set puts request id in state with reason, as a timeout, a newer request
// or an operator closes it.
func (s *requestStore) set(id int64, state, reason string) {
	for _, r := range s.reqs {
		if r.ID == id {
			r.State, r.ClosedReason = state, reason
		}
	}
}

func (s *requestStore) OpenRequests(_ context.Context, typ, rtyp string) ([]Request, error) {
	var out []Request
	for _, r := range s.reqs {
		if (r.State == "SENT" || r.State == "WAITING") && r.Type == typ && (rtyp == "" || r.RTYP == rtyp) {
			out = append(out, r.Request)
		}
	}
	slices.SortStableFunc(out, func(a, b Request) int { return a.SentAt.Compare(b.SentAt) })
	return out, nil
}

func (s *requestStore) ReceivedAt(context.Context) (time.Time, error) { return s.received, nil }

func (s *requestStore) RequestState(_ context.Context, id int64) (string, string, bool, error) {
	for _, r := range s.reqs {
		if r.ID == id {
			return r.State, r.ClosedReason, true, nil
		}
	}
	return "", "", false, nil
}

func (s *requestStore) CloseRequest(_ context.Context, op RequestClose) error {
	for _, r := range s.reqs {
		if r.ID == op.ID && (r.State == "SENT" || r.State == "WAITING") {
			r.State, r.ClosedReason = "DONE", op.Reason()
			s.closes = append(s.closes, op)
			return nil
		}
	}
	return ErrRequestNotOpen
}

func rqfdResponse(t *testing.T, window string) *sis.Message {
	return sisMessage(t, "SCHD", "RESP", "<SCHD>"+window+"<RECS>0</RECS></SCHD>")
}

// TestRequests_R_C7_C_23_MatchesFromTheViewAlone: matching a response to
// its request reads only the view's open requests and receive time, and
// closing it is one sink write — exact echo within the deadline, an echo
// after the deadline or of no open window skipped with the reason, the
// oldest eligible request by fallback, and a stored match whose request
// was closed meanwhile left untouched.
func TestRequests_R_C7_C_23_MatchesFromTheViewAlone(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2021, 1, 23, 5, 0, 0, 0, time.UTC) // the responses' DTTM is 05:30:00
	st := &requestStore{
		reqs: []*tracked{
			{Request: Request{ID: 1, STDB: "22JAN21", STDE: "22JAN21", SentAt: t0, Deadline: t0.Add(time.Minute)}, Type: "RQFD", State: "WAITING"},
			{Request: Request{ID: 2, STDB: "23JAN21", STDE: "23JAN21", SentAt: t0.Add(time.Second), Deadline: t0.Add(time.Hour)}, Type: "RQFD", State: "WAITING"},
			{Request: Request{ID: 3, STDB: "24JAN21", STDE: "24JAN21", SentAt: t0.Add(time.Hour), Deadline: t0.Add(2 * time.Hour)}, Type: "RQFD", State: "SENT"},
		},
		received: t0.Add(10 * time.Minute),
	}
	q := &Requests{View: st, Sink: st, MsgID: 9, Now: t0.Add(11 * time.Minute)}

	m, skip, err := q.MatchRQFD(ctx, rqfdResponse(t, "<STDB>23JAN21</STDB><STDE>23JAN21</STDE>"))
	require.NoError(t, err)
	require.Empty(t, skip)
	require.Equal(t, &RequestMatch{ID: 2, Kind: MatchExact, SentAt: t0.Add(time.Second)}, m)

	_, skip, err = q.MatchRQFD(ctx, rqfdResponse(t, "<STDB>22JAN21</STDB><STDE>22JAN21</STDE>"))
	require.NoError(t, err)
	require.Contains(t, skip, "after its deadline")

	_, skip, err = q.MatchRQFD(ctx, rqfdResponse(t, "<STDB>25JAN21</STDB><STDE>25JAN21</STDE>"))
	require.NoError(t, err)
	require.Equal(t, "echoed window 25JAN21..25JAN21 matches none of the 3 open RQFD requests", skip)

	// No echo: request 1 is past its deadline, request 3 was sent after
	// the DTTM, so request 2 is the only candidate.
	m, skip, err = q.MatchRQFD(ctx, rqfdResponse(t, ""))
	require.NoError(t, err)
	require.Empty(t, skip)
	require.Equal(t, &RequestMatch{ID: 2, Kind: MatchFallback, Candidates: 1, SentAt: t0.Add(time.Second)}, m)
	require.Empty(t, st.closes, "matching writes nothing")

	a, err := q.Close(ctx, "RQFD", m)
	require.NoError(t, err)
	require.Equal(t, Answer{Suffix: "; answers RQFD request 2 (fallback match)", Closed: true}, a)
	require.Equal(t, []RequestClose{{Type: "RQFD", ID: 2, Kind: MatchFallback, MsgID: 9, Now: q.Now}}, st.closes)
	require.Equal(t, "answered by message 9 (fallback match)", st.closes[0].Reason())

	// A stored match (an earlier batch's) whose request was closed or
	// purged meanwhile is not written.
	st.set(2, "EXPIRED", "timeout")
	a, err = q.Close(ctx, "RQFD", &RequestMatch{ID: 2, Kind: MatchExact, Stored: true})
	require.NoError(t, err)
	require.Equal(t, "; answers RQFD request 2 (exact match), which was closed meanwhile (EXPIRED: timeout) and stays closed", a.Suffix)
	a, err = q.Close(ctx, "RQFD", &RequestMatch{ID: 4, Kind: MatchExact, Stored: true})
	require.NoError(t, err)
	require.True(t, a.Gone)
	require.Len(t, st.closes, 1)
	st.set(2, "WAITING", "")
	a, err = q.Close(ctx, "RQFD", &RequestMatch{ID: 2, Kind: MatchExact, Stored: true})
	require.NoError(t, err)
	require.True(t, a.Closed)
	require.Len(t, st.closes, 2, "a stored match whose request is still open closes it")

	st.reqs = nil
	m, why, err := q.MatchRQRD(ctx, sisMessage(t, "AIRL", "RESP", ""))
	require.NoError(t, err)
	require.Nil(t, m)
	require.Empty(t, why, "no open request: nothing to explain")
}

// TestRequests_R_C7_G_RESP_GUARD_ExactEchoMatch: an SCHD RESP echoing an
// open RQFD request's window is applied as a snapshot (like DNLD) and
// closes exactly that request DONE with the response, by the same
// message; another open window stays open.
func TestRequests_R_C7_G_RESP_GUARD_ExactEchoMatch(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
	want := r.req.add("RQFD", "20210123..20210123", "WAITING", t0)
	other := r.req.add("RQFD", "20210124..20210124", "WAITING", t0)
	r.req.received = t0.Add(6 * time.Second)

	v := r.run(10, schdResp(10, dttm(5*time.Second), "<STDB>20210123</STDB><STDE>20210123</STDE>", fltr(15, day23, "<STND>505</STND>")))
	require.Equal(t, applied, v.State, v.Reason)
	require.Equal(t, fmt.Sprintf("snapshot: 1 records, 1 changed, 1 deleted, 1 days; answers RQFD request %d (exact match)", want), v.Reason)
	require.Equal(t, "505", r.flight(15).Doc["STND"])
	require.Equal(t, "DELETED", r.flight(16).State, "applied exactly like a DNLD snapshot")
	require.Equal(t, []RequestClose{{Type: "RQFD", ID: want, Kind: MatchExact, MsgID: 10, Now: r.at(10)}}, r.req.closes,
		"closed by the response, at the time it is written")
	q := r.req.get(t, want)
	require.Equal(t, "DONE", q.State)
	require.Equal(t, "answered by message 10 (exact match)", q.ClosedReason)
	require.Equal(t, "WAITING", r.req.get(t, other).State)
}

// TestRequests_R_C7_C_23_FallbackMatchIsRecordedAndLogged: without an echo
// the RESP answers the oldest open RQFD request sent no later than its DTTM
// (compared in the airport zone at whole seconds); the match is recorded as
// fallback and logged for audit.
//
// Validation 001§6 and 002§8 "请求超时、无匹配 RESP、时间单位不一致".
func TestRequests_R_C7_C_23_FallbackMatchIsRecordedAndLogged(t *testing.T) {
	t.Parallel()
	logs := &testutil.LogBuffer{}
	r := newRules(t)
	r.log = slog.New(slog.NewTextHandler(logs, nil))
	first := r.req.add("RQFD", "a..b", "SENT", t0.Add(500*time.Millisecond)) // same second as the DTTM
	second := r.req.add("RQFD", "c..d", "WAITING", t0.Add(-5*time.Second))
	later := r.req.add("RQFD", "e..f", "WAITING", t0.Add(2*time.Second)) // sent after the DTTM
	r.req.received = t0.Add(3 * time.Second)

	v := r.run(1, schdResp(1, dttm(0), "", fltr(15, day23)))
	require.Equal(t, applied, v.State, v.Reason)
	require.Contains(t, v.Reason, fmt.Sprintf("answers RQFD request %d (fallback match)", second), "the oldest eligible one")
	require.Equal(t, "DONE", r.req.get(t, second).State)
	require.Equal(t, []RequestClose{{Type: "RQFD", ID: second, Kind: MatchFallback, MsgID: 1, Now: r.at(1)}}, r.req.closes)
	require.Contains(t, logs.String(), "response matched by fallback")
	require.Contains(t, logs.String(), "audit=request-fallback-match")
	require.Contains(t, logs.String(), fmt.Sprintf("request_id=%d", second))
	require.Contains(t, logs.String(), "candidates=2")

	v = r.run(2, schdResp(2, dttm(0), "", fltr(15, day23)))
	require.Equal(t, succeeded, v.State, "an unchanged snapshot changes no flight")
	require.Contains(t, v.Reason, fmt.Sprintf("answers RQFD request %d (fallback match)", first))
	require.Equal(t, "DONE", r.req.get(t, first).State, "sent in the DTTM's second: DTTM ≥ sent_at at whole seconds")
	require.Equal(t, "WAITING", r.req.get(t, later).State)

	v = r.run(3, schdResp(3, dttm(0), "", fltr(15, day23)))
	require.Equal(t, skipped, v.State)
	require.Equal(t, "SCHD RESP without a matching open RQFD request: every open request was sent after the response's DTTM "+dttm(0), v.Reason)
	require.Equal(t, "WAITING", r.req.get(t, later).State)
	require.Len(t, r.req.closes, 2)
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
		requests func(s *requestStore)
		resp     string
		received time.Duration
		reason   string
	}{
		{"NothingOpen", func(*requestStore) {},
			schdResp(1, dttm(10*time.Second), "", fltr(15, day23)), 11 * time.Second, "no RQFD request is open"},
		{"OnlyRegisteredNotSent", func(s *requestStore) { s.add("RQFD", "a..b", "REGISTERED", t0) },
			schdResp(1, dttm(10*time.Second), "", fltr(15, day23)), 11 * time.Second, "no RQFD request is open"},
		{"OnlyRQRDOpen", func(s *requestStore) { s.add("RQRD", "GLST", "WAITING", t0) },
			schdResp(1, dttm(10*time.Second), "", fltr(15, day23)), 11 * time.Second, "no RQFD request is open"},
		{"EchoOfAnotherWindow", func(s *requestStore) { s.add("RQFD", "a..b", "WAITING", t0) },
			schdResp(1, dttm(10*time.Second), "<STDB>a</STDB><STDE>c</STDE>", fltr(15, day23)), 11 * time.Second,
			"echoed window a..c matches none of the 1 open RQFD requests"},
		{"EchoButArrivedAfterDeadline", func(s *requestStore) { s.add("RQFD", "a..b", "WAITING", t0) },
			schdResp(1, dttm(10*time.Second), "<STDB>a</STDB><STDE>b</STDE>", fltr(15, day23)), 61 * time.Second,
			"after its deadline 2021-01-23 08:01:00"},
		{"DTTMBeforeSending", func(s *requestStore) { s.add("RQFD", "a..b", "WAITING", t0) },
			schdResp(1, dttm(-time.Second), "", fltr(15, day23)), 11 * time.Second, "every open request was sent after the response's DTTM 20210123075959"},
		{"FallbackArrivedAfterDeadline", func(s *requestStore) { s.add("RQFD", "a..b", "WAITING", t0) },
			schdResp(1, dttm(10*time.Second), "", fltr(15, day23)), 60*time.Second + time.Millisecond, "after the deadline of every open request"},
		{"NoDTTM", func(s *requestStore) { s.add("RQFD", "a..b", "WAITING", t0) },
			schdResp(1, "", "", fltr(15, day23)), 11 * time.Second, "no echo and DTTM \"\": want yyyyMMddHHmmss"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRules(t)
			tc.requests(r.req)
			var before []tracked
			for _, q := range r.req.reqs {
				before = append(before, *q)
			}
			r.req.received = t0.Add(tc.received)
			v := r.run(1, tc.resp)
			require.Equal(t, skipped, v.State, v.Reason)
			require.True(t, strings.HasPrefix(v.Reason, "SCHD RESP without a matching open RQFD request: "), v.Reason)
			require.Contains(t, v.Reason, tc.reason)
			require.Empty(t, r.st.flights)
			require.Empty(t, r.req.closes)
			for i, q := range r.req.reqs {
				require.Equal(t, before[i], *q, "request unchanged")
			}
		})
	}
}

// TestRequests_R_C7_RejectedResponseLeavesRequestOpen: a matching RESP whose
// snapshot is refused (DEAD(PROTOCOL)) writes nothing, and its request
// stays open: completion only follows successful processing.
//
// Validation 001§6 and 002§8 "请求超时、无匹配 RESP、时间单位不一致".
func TestRequests_R_C7_RejectedResponseLeavesRequestOpen(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	id := r.req.add("RQFD", "a..b", "WAITING", t0)
	r.req.received = t0.Add(time.Second)
	bad := sistest.EnvelopeAt(1, "SCHD", "RESP", dttm(time.Second), "<SCHD><RECS>2</RECS>"+fltr(15, day23)+"</SCHD>")
	v := r.run(1, bad)
	require.Equal(t, dead, v.State)
	require.Equal(t, ClassProtocol, v.Class)
	require.Contains(t, v.Reason, `RECS "2"`)
	require.Equal(t, "WAITING", r.req.get(t, id).State)
	require.Empty(t, r.req.closes)
	require.Empty(t, r.st.flights)
}

// TestRequests_R_C10_R_D5_ReferenceRESPClosesMatchingRQRD: a reference RESP
// is applied as R-C10 says in every case (it replaces its type), and by the
// same message closes the open RQRD request of the same RTYP (fallback
// match: the RESP carries no echo). Without a request it is applied alone.
func TestRequests_R_C10_R_D5_ReferenceRESPClosesMatchingRQRD(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	gates := r.req.add("RQRD", "GLST", "WAITING", t0)
	stands := r.req.add("RQRD", "SLST", "WAITING", t0)
	r.req.received = t0.Add(5 * time.Second)
	v := r.run(1, refResp(1, "GLST", dttm(4*time.Second), glst("A", "a"), glst("B", "b")))
	require.Equal(t, succeeded, v.State, v.Reason)
	require.Equal(t, fmt.Sprintf("GLST RESP: 2 records; answers RQRD request %d (fallback match)", gates), v.Reason)
	require.Equal(t, []string{"A", "B"}, r.refKeys("GLST"))
	require.Equal(t, []RequestClose{{Type: "RQRD", ID: gates, Kind: MatchFallback, MsgID: 1, Now: r.at(1)}}, r.req.closes)
	require.Equal(t, "DONE", r.req.get(t, gates).State)
	require.Equal(t, "WAITING", r.req.get(t, stands).State, "another type's request stays open")

	// Unsolicited: applied, nothing closed.
	v = r.run(2, refResp(2, "GLST", dttm(5*time.Second), glst("C", "c")))
	require.Equal(t, succeeded, v.State)
	require.Equal(t, "GLST RESP: 1 records", v.Reason)
	require.Equal(t, []string{"C"}, r.refKeys("GLST"))
	require.Len(t, r.req.closes, 1, "a closed request keeps its answer")

	// Sent after the RESP was created: applied, the request stays open.
	late := r.req.add("RQRD", "ABDG", "WAITING", t0.Add(5*time.Second))
	v = r.run(3, refResp(3, "ABDG", dttm(0), "<ABDG><ABCD>X</ABCD></ABDG>"))
	require.Equal(t, "ABDG RESP: 1 records", v.Reason)
	require.Equal(t, "WAITING", r.req.get(t, late).State)
	require.Len(t, r.req.closes, 1)
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
	r := newRules(t)
	r.budget = 2
	req := r.req.add("RQFD", "23JAN21..23JAN21", "WAITING", t0)
	r.req.received = t0.Add(5 * time.Second)
	var before tracked
	r.between = func(p Progress) {
		if p.Batches > 1 {
			return
		}
		require.Equal(t, &RequestMatch{ID: req, Kind: MatchExact, SentAt: t0}, p.Match, "stored with the first batch's progress")
		require.Equal(t, "WAITING", r.req.get(t, req).State, "closed only with the whole package")
		// Closed between batches: by its timeout here; superseding and an
		// operator close it the same way.
		r.req.set(req, "EXPIRED", "timeout")
		before = r.req.get(t, req)
	}
	v := r.run(1, schdResp(1, dttm(5*time.Second), sistest.Window23, sistest.FLTRs(15, 19)...))
	require.Equal(t, fmt.Sprintf("snapshot in progress: 2 of 5 records written, 2 changed, 0 deleted, 1 batches committed; answers RQFD request %d (exact match)", req),
		r.st.notes[0])
	require.Equal(t, applied, v.State, v.Reason)
	require.Equal(t, fmt.Sprintf("snapshot: 5 records, 5 changed, 0 deleted, 1 days, 3 batches; answers RQFD request %d"+
		" (exact match), which was closed meanwhile (EXPIRED: timeout) and stays closed", req), v.Reason)
	for flid := int64(15); flid <= 19; flid++ {
		require.Equal(t, "ACTIVE", r.flight(flid).State)
	}
	require.Equal(t, before, r.req.get(t, req), "the closed request is not changed")
	require.Empty(t, r.req.closes)
	require.Nil(t, r.st.progress)
}

// TestSchd_R_C7_RESPContinuesUnderItsMatchNotANewerRequest: a request
// superseded between batches by a newer one of the same window leaves the
// package answering the request it matched at its first batch: the later
// batches do not match again, so the newer request stays open for its own
// answer.
func TestSchd_R_C7_RESPContinuesUnderItsMatchNotANewerRequest(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.budget = 2
	old := r.req.add("RQFD", "23JAN21..23JAN21", "WAITING", t0)
	r.req.received = t0.Add(5 * time.Second)
	var newer int64
	r.between = func(p Progress) {
		require.Equal(t, 2, p.Next, "one step left")
		r.req.set(old, "EXPIRED", "superseded by a newer request")
		newer = r.req.add("RQFD", "23JAN21..23JAN21", "WAITING", t0.Add(6*time.Second))
	}
	v := r.run(1, schdResp(1, dttm(5*time.Second), sistest.Window23, sistest.FLTRs(15, 17)...))
	require.Equal(t, applied, v.State, v.Reason)
	require.Contains(t, v.Reason, fmt.Sprintf("answers RQFD request %d (exact match), which was closed meanwhile (EXPIRED: superseded by a newer request)", old))
	require.Equal(t, "EXPIRED", r.req.get(t, old).State)
	require.Equal(t, "WAITING", r.req.get(t, newer).State, "the newer request still waits for its own answer")
	require.Empty(t, r.req.closes)
}
