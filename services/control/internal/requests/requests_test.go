package requests

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"msgexchange/libs/clock"
	"msgexchange/libs/testutil"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/controltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testNow is 20:00 airport time on 2026-03-01.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type bundle struct {
	pool  *pgxpool.Pool
	clock *clock.Fake
	srv   *Server
}

func setup(t *testing.T) *bundle {
	t.Helper()
	_, pool := controltest.MigratedPool(t)
	zone, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	fake := clock.NewFake(testNow)
	logger := testutil.Logger(t, slog.LevelDebug)
	return &bundle{pool: pool, clock: fake, srv: NewServer(pool, fake, logger, 10*time.Second, zone, []string{"LDM", "REGN", "RSTA", "EROR"})}
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func (b *bundle) rqfd(t *testing.T, stdb, stde string) *controlv1.SendRequestResponse {
	t.Helper()
	resp, err := b.srv.SendRQFD(ctx(t), &controlv1.SendRQFDRequest{Stdb: stdb, Stde: stde, Operator: "ops", Reason: "gap after outage"})
	require.NoError(t, err)
	return resp
}

func (b *bundle) rqrd(t *testing.T, rtyp string) *controlv1.SendRequestResponse {
	t.Helper()
	resp, err := b.srv.SendRQRD(ctx(t), &controlv1.SendRQRDRequest{Rtyp: rtyp, Operator: "ops", Reason: "refresh gates"})
	require.NoError(t, err)
	return resp
}

func (b *bundle) state(t *testing.T, id int64) (state, closedReason string) {
	t.Helper()
	var reason *string
	require.NoError(t, b.pool.QueryRow(ctx(t), `SELECT state, closed_reason FROM req_track WHERE id=$1`, id).Scan(&state, &reason))
	if reason != nil {
		closedReason = *reason
	}
	return state, closedReason
}

// TestSend_R_D5_G_REQ_TRACK_RegistersRequestAndOutboxRow: a send records the
// request REGISTERED with the encoded XML, the operator and the reason, and
// queues exactly that XML for COUTMSGS in the same transaction.
//
// Also names US-09.
func TestSend_R_D5_G_REQ_TRACK_RegistersRequestAndOutboxRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name  string
		send  func() *controlv1.SendRequestResponse
		check func(*testing.T, *controlv1.OutboundRequest)
	}{
		{"RQFD", func() *controlv1.SendRequestResponse { return b.rqfd(t, "20260302", "20260303") }, func(t *testing.T, r *controlv1.OutboundRequest) {
			require.Equal(t, controlv1.RequestType_REQUEST_TYPE_RQFD, r.GetType())
			require.Equal(t, "20260302", r.GetStdb())
			require.Equal(t, "20260303", r.GetStde())
			require.Empty(t, r.GetRtyp())
			require.Contains(t, r.GetXml(), "<TYPE>RQFD</TYPE><STYP>NONE</STYP></META><RQFD><STDB>20260302</STDB><STDE>20260303</STDE></RQFD>")
			require.Equal(t, "gap after outage", r.GetReason())
		}},
		{"RQRD", func() *controlv1.SendRequestResponse { return b.rqrd(t, " glst ") }, func(t *testing.T, r *controlv1.OutboundRequest) {
			require.Equal(t, controlv1.RequestType_REQUEST_TYPE_RQRD, r.GetType())
			require.Equal(t, "GLST", r.GetRtyp(), "normalized")
			require.Empty(t, r.GetStdb())
			require.Contains(t, r.GetXml(), "<TYPE>RQRD</TYPE><STYP>GLST</STYP></META><RQRD><RTYP>GLST</RTYP></RQRD>")
		}},
	}
	for i, tc := range tests { // sequential: the SEQN counter is shared
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.send()
			r := resp.GetRequest()
			require.Zero(t, resp.GetSupersededId())
			require.Positive(t, r.GetId())
			require.Equal(t, controlv1.RequestState_REQUEST_STATE_REGISTERED, r.GetState())
			require.Equal(t, "VIEW", r.GetSender())
			require.Equal(t, fmt.Sprintf("%06d", i+1), r.GetSeqn(), "six digits from the cycling sequence")
			require.Equal(t, "ops", r.GetOperator())
			require.True(t, r.GetRegisteredAt().AsTime().Equal(testNow))
			require.Nil(t, r.GetSentAt())
			require.Zero(t, r.GetOutboundId())
			require.Contains(t, r.GetXml(), "<SNDR>VIEW</SNDR><SEQN>"+r.GetSeqn()+"</SEQN><DTTM>20260301200000</DTTM>")
			tc.check(t, r)

			var target, payload string
			var msgID *int64
			var state string
			require.NoError(t, b.pool.QueryRow(ctx(t), `SELECT target, convert_from(payload, 'UTF8'), msg_id, state FROM outbox WHERE pkey=$1`,
				strconv.FormatInt(r.GetId(), 10)).Scan(&target, &payload, &msgID, &state))
			require.Equal(t, "coutmsgs", target)
			require.Equal(t, r.GetXml(), payload)
			require.Nil(t, msgID)
			require.Equal(t, "PENDING", state)
		})
	}
}

// TestSend_R_D5_G_REQ_OPEN_UNIQUE_NewRequestExpiresOldOfSameScope: at most
// one request per (type, scope, sender) is open; a new one expires the old
// one in the same transaction, other scopes are untouched, and a closed
// request is never touched again.
func TestSend_R_D5_G_REQ_OPEN_UNIQUE_NewRequestExpiresOldOfSameScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.rqfd(t, "20260302", "20260302").GetRequest().GetId()
	otherWindow := b.rqfd(t, "20260303", "20260303").GetRequest().GetId()
	gates := b.rqrd(t, "GLST").GetRequest().GetId()
	stands := b.rqrd(t, "SLST").GetRequest().GetId()
	b.exec(t, `UPDATE req_track SET state='WAITING', sent_at=$2, outbound_id=7 WHERE id=$1`, first, testNow)

	b.clock.Advance(time.Minute)
	second := b.rqfd(t, "20260302", "20260302")
	require.Equal(t, first, second.GetSupersededId())
	st, reason := b.state(t, first)
	require.Equal(t, "EXPIRED", st)
	require.Equal(t, fmt.Sprintf("superseded by request %d", second.GetRequest().GetId()), reason)
	var closed time.Time
	require.NoError(t, b.pool.QueryRow(ctx(t), `SELECT closed_at FROM req_track WHERE id=$1`, first).Scan(&closed))
	require.True(t, closed.Equal(testNow.Add(time.Minute)))

	for _, id := range []int64{otherWindow, gates, stands} {
		st, _ := b.state(t, id)
		require.Equal(t, "REGISTERED", st, "request %d of another scope stays open", id)
	}
	gates2 := b.rqrd(t, "glst")
	require.Equal(t, gates, gates2.GetSupersededId())
	third := b.rqfd(t, "20260302", "20260302")
	require.Equal(t, second.GetRequest().GetId(), third.GetSupersededId(), "only the open one is expired")
	st, reason = b.state(t, first)
	require.Equal(t, "EXPIRED", st)
	require.Contains(t, reason, fmt.Sprintf("request %d", second.GetRequest().GetId()), "a closed request is never changed again")

	var open int
	require.NoError(t, b.pool.QueryRow(ctx(t), `SELECT count(*) FROM req_track WHERE state IN ('REGISTERED','SENT','WAITING')`).Scan(&open))
	require.Equal(t, 4, open, "one per scope: two windows, GLST, SLST")
}

// TestSchema_G_REQ_OPEN_UNIQUE_IndexRefusesSecondOpenRequest: the partial
// unique index itself refuses a second open request of one scope, whatever
// writes it; closed requests do not count.
func TestSchema_G_REQ_OPEN_UNIQUE_IndexRefusesSecondOpenRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	insert := func(typ, stdb, stde, rtyp, state string) error {
		var closed any
		if state == "DONE" || state == "EXPIRED" {
			closed = testNow
		}
		var sent any
		if state != "REGISTERED" && state != "EXPIRED" {
			sent = testNow
		}
		_, err := b.pool.Exec(ctx(t), `INSERT INTO req_track (type, stdb, stde, rtyp, sender, seqn, state, xml, operator, reason, registered_at, closed_at, sent_at, response_msg_id, match_kind)
			VALUES ($1, NULLIF($2,''), NULLIF($3,''), NULLIF($4,''), 'VIEW', '000001', $5, '<MSG/>', 'o', 'r', $6, $7, $8,
			        CASE WHEN $5='DONE' THEN 1 END, CASE WHEN $5='DONE' THEN 'fallback' END)`, typ, stdb, stde, rtyp, state, testNow, closed, sent)
		return err
	}
	require.NoError(t, insert("RQFD", "a", "b", "", "WAITING"))
	require.NoError(t, insert("RQFD", "a", "c", "", "SENT"), "another window")
	require.NoError(t, insert("RQFD", "a", "b", "", "DONE"), "closed rows do not count")
	require.NoError(t, insert("RQFD", "a", "b", "", "EXPIRED"))
	requireUnique(t, insert("RQFD", "a", "b", "", "REGISTERED"))
	require.NoError(t, insert("RQRD", "", "", "GLST", "REGISTERED"))
	requireUnique(t, insert("RQRD", "", "", "GLST", "WAITING"))
	require.Error(t, insert("RQRD", "a", "b", "GLST", "EXPIRED"), "an RQRD has no window")
	require.Error(t, insert("RQFD", "a", "", "", "EXPIRED"), "an RQFD needs both ends")
}

func requireUnique(t *testing.T, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code, pgErr.Message)
	require.Equal(t, "req_track_open_scope_uidx", pgErr.ConstraintName)
}

// TestSend_G_REQ_OPEN_UNIQUE_ConcurrentSendsLeaveOneOpen: concurrent sends
// of one scope are serialized; each succeeds and exactly one stays open.
func TestSend_G_REQ_OPEN_UNIQUE_ConcurrentSendsLeaveOneOpen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.srv.SendRQRD(ctx(t), &controlv1.SendRQRDRequest{Rtyp: "GLST", Operator: "o", Reason: "r"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var open, expired, seqns int
	require.NoError(t, b.pool.QueryRow(ctx(t), `SELECT count(*) FILTER (WHERE state='REGISTERED'), count(*) FILTER (WHERE state='EXPIRED'), count(DISTINCT seqn) FROM req_track`).Scan(&open, &expired, &seqns))
	require.Equal(t, 1, open)
	require.Equal(t, n-1, expired)
	require.Equal(t, n, seqns, "every request has its own SEQN")
}

// TestSend_R_D5_SeqnCyclesAfter999999: the SEQN counter wraps to 000001.
func TestSend_R_D5_SeqnCyclesAfter999999(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `SELECT setval('req_track_seqn', 999998)`)
	require.Equal(t, "999999", b.rqrd(t, "GLST").GetRequest().GetSeqn())
	require.Equal(t, "000001", b.rqrd(t, "GLST").GetRequest().GetSeqn())
}

// TestSend_R_D5_Validation: the request fields and the audit fields are
// checked before anything is written; every problem is reported at once.
func TestSend_R_D5_Validation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name string
		call func(context.Context) error
		want []string
	}{
		{"RQFDWithoutWindow", func(c context.Context) error {
			_, err := b.srv.SendRQFD(c, &controlv1.SendRQFDRequest{Operator: "o", Reason: "r"})
			return err
		}, []string{"STDB is required", "STDE is required"}},
		{"RQFDWithoutAudit", func(c context.Context) error {
			_, err := b.srv.SendRQFD(c, &controlv1.SendRQFDRequest{Stdb: "a", Stde: "b", Operator: " "})
			return err
		}, []string{"operator is required", "reason is required"}},
		{"RQRDUnknownType", func(c context.Context) error {
			_, err := b.srv.SendRQRD(c, &controlv1.SendRQRDRequest{Rtyp: "SCHD", Operator: "o", Reason: "r"})
			return err
		}, []string{`RTYP "SCHD" is not a requestable reference type`, "SLST GLST"}},
		{"RQRDMissingType", func(c context.Context) error {
			_, err := b.srv.SendRQRD(c, &controlv1.SendRQRDRequest{Operator: "o", Reason: "r"})
			return err
		}, []string{"RTYP is required"}},
		{"AuditTooLong", func(c context.Context) error {
			_, err := b.srv.SendRQRD(c, &controlv1.SendRQRDRequest{Rtyp: "GLST", Operator: "o", Reason: strings.Repeat("x", 501)})
			return err
		}, []string{"reason is longer than 500"}},
		{"ListNegativeLimit", func(c context.Context) error {
			_, err := b.srv.ListRequests(c, &controlv1.ListRequestsRequest{Limit: -1})
			return err
		}, []string{"limit -1: must not be negative"}},
		{"ListUnknownState", func(c context.Context) error {
			_, err := b.srv.ListRequests(c, &controlv1.ListRequestsRequest{State: 42})
			return err
		}, []string{"state 42: not a value of RequestState"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call(ctx(t))
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	var n int
	require.NoError(t, b.pool.QueryRow(ctx(t), `SELECT (SELECT count(*) FROM req_track) + (SELECT count(*) FROM outbox)`).Scan(&n))
	require.Zero(t, n, "nothing written by a refused call")
}

// TestList_R_F1_NewestFirstWithStateFilterAndLimit lists requests.
func TestList_R_F1_NewestFirstWithStateFilterAndLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.rqrd(t, "GLST").GetRequest().GetId()
	c := b.rqrd(t, "GLST").GetRequest().GetId() // expires a
	d := b.rqfd(t, "x", "y").GetRequest().GetId()
	b.exec(t, `UPDATE req_track SET state='DONE', sent_at=$2, timeout_at=$2, closed_at=$2, outbound_id=9, response_msg_id=77, match_kind='fallback', closed_reason='answered' WHERE id=$1`, d, testNow)

	ids := func(req *controlv1.ListRequestsRequest) []int64 {
		resp, err := b.srv.ListRequests(ctx(t), req)
		require.NoError(t, err)
		var out []int64
		for _, r := range resp.GetRequests() {
			out = append(out, r.GetId())
		}
		return out
	}
	require.Equal(t, []int64{d, c, a}, ids(&controlv1.ListRequestsRequest{}))
	require.Equal(t, []int64{d, c}, ids(&controlv1.ListRequestsRequest{Limit: 2}))
	require.Equal(t, []int64{a}, ids(&controlv1.ListRequestsRequest{State: controlv1.RequestState_REQUEST_STATE_EXPIRED}))
	require.Equal(t, []int64{c}, ids(&controlv1.ListRequestsRequest{State: controlv1.RequestState_REQUEST_STATE_REGISTERED}))

	resp, err := b.srv.ListRequests(ctx(t), &controlv1.ListRequestsRequest{State: controlv1.RequestState_REQUEST_STATE_DONE})
	require.NoError(t, err)
	require.Len(t, resp.GetRequests(), 1)
	done := resp.GetRequests()[0]
	require.Equal(t, int64(9), done.GetOutboundId())
	require.Equal(t, int64(77), done.GetResponseMsgId())
	require.Equal(t, controlv1.MatchKind_MATCH_KIND_FALLBACK, done.GetMatchKind())
	require.Equal(t, "answered", done.GetClosedReason())
	require.True(t, done.GetClosedAt().AsTime().Equal(testNow))
}

// TestEnums_EveryReqTrackValueIsInTheContract reads the CHECK constraints of
// req_track and maps every value they allow.
func TestEnums_EveryReqTrackValueIsInTheContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	allowed := func(column string) []string {
		rows, err := b.pool.Query(ctx(t), `
SELECT pg_get_constraintdef(c.oid)
FROM pg_constraint c
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
WHERE c.contype = 'c' AND c.conrelid = 'req_track'::regclass AND a.attname = $1 AND cardinality(c.conkey) = 1`, column)
		require.NoError(t, err)
		defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Len(t, defs, 1, column)
		var vals []string
		for _, m := range regexp.MustCompile(`'([A-Za-z_]+)'`).FindAllStringSubmatch(defs[0], -1) {
			vals = append(vals, m[1])
		}
		require.NotEmpty(t, vals)
		return vals
	}
	for _, v := range allowed("type") {
		_, err := typeFromDB(v)
		require.NoError(t, err, v)
	}
	for _, v := range allowed("state") {
		_, err := stateFromDB(v)
		require.NoError(t, err, v)
	}
	for _, v := range allowed("match_kind") {
		_, err := matchFromDB(&v)
		require.NoError(t, err, v)
	}
	_, err := stateFromDB("LOST")
	require.ErrorIs(t, err, errContractMismatch)
}

func (b *bundle) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(ctx(t), q, args...)
	require.NoError(t, err)
}

// TestRequests_R_C12_RQRDForAnIgnoredTypeIsRefused: a type on the ignore
// list (REGN by default, R-B9) is never requested: the RQRD is refused with
// FailedPrecondition naming the type and the ignore list, whatever the
// case it is written in, and nothing is registered or queued for the
// mailbox; a type not on the list is requested as usual.
func TestRequests_R_C12_RQRDForAnIgnoredTypeIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, rtyp := range []string{"REGN", "regn"} {
		_, err := b.srv.SendRQRD(ctx(t), &controlv1.SendRQRDRequest{Rtyp: rtyp, Operator: "ops", Reason: "registrations changed"})
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "%s: %v", rtyp, err)
		msg := status.Convert(err).Message()
		require.Contains(t, msg, "RQRD for REGN refused: REGN is on the ignore list")
		require.Contains(t, msg, "processor.pipeline.ignore-types = LDM,REGN,RSTA,EROR")
	}
	var requests, outbox int
	require.NoError(t, b.pool.QueryRow(ctx(t), `SELECT (SELECT count(*) FROM req_track), (SELECT count(*) FROM outbox)`).Scan(&requests, &outbox))
	require.Zero(t, requests, "nothing registered")
	require.Zero(t, outbox, "nothing queued for COUTMSGS")

	require.Equal(t, "GLST", b.rqrd(t, "GLST").GetRequest().GetRtyp())

	// Without REGN on the list it is an ordinary reference type.
	zone, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	open := NewServer(b.pool, b.clock, testutil.Logger(t, slog.LevelDebug), 10*time.Second, zone, nil)
	resp, err := open.SendRQRD(ctx(t), &controlv1.SendRQRDRequest{Rtyp: "REGN", Operator: "ops", Reason: "registrations stored now"})
	require.NoError(t, err)
	require.Equal(t, "REGN", resp.GetRequest().GetRtyp())
}
