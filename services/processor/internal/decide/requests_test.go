package decide

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/sis"
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
	st.reqs[1].State, st.reqs[1].ClosedReason = "EXPIRED", "timeout"
	a, err = q.Close(ctx, "RQFD", &RequestMatch{ID: 2, Kind: MatchExact, Stored: true})
	require.NoError(t, err)
	require.Equal(t, "; answers RQFD request 2 (exact match), which was closed meanwhile (EXPIRED: timeout) and stays closed", a.Suffix)
	a, err = q.Close(ctx, "RQFD", &RequestMatch{ID: 4, Kind: MatchExact, Stored: true})
	require.NoError(t, err)
	require.True(t, a.Gone)
	require.Len(t, st.closes, 1)
	st.reqs[1].State, st.reqs[1].ClosedReason = "WAITING", ""
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
