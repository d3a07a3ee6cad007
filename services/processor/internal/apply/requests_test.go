package apply

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"msgexchange/services/processor/internal/decide"
)

// addRequest stores a request of typ in state, as the control plane and
// the dispatcher leave it: scope is the RQFD window's STDB (STDE the same)
// or the RQRD's RTYP; a request not REGISTERED was sent at sent, a WAITING
// one times out a minute later, a closed one was closed at sent.
func addRequest(t *testing.T, tx pgx.Tx, typ, scope, state string, sent time.Time) int64 {
	t.Helper()
	var stdb, rtyp, sentAt, timeout, closed any
	if typ == "RQFD" {
		stdb = scope
	} else {
		rtyp = scope
	}
	if state != "REGISTERED" {
		sentAt = sent
	}
	switch state {
	case "WAITING":
		timeout = sent.Add(time.Minute)
	case "DONE", "EXPIRED":
		closed = sent
	}
	var id int64
	require.NoError(t, tx.QueryRow(context.Background(), `
		INSERT INTO req_track (type, stdb, stde, rtyp, sender, seqn, state, xml, operator, reason, registered_at, sent_at, timeout_at, closed_at,
			response_msg_id, match_kind)
		VALUES ($1, $2, $2, $3, 'VIEW', '000001', $4, '<MSG/>', 'ops', 'test', $5, $6, $7, $8,
			CASE WHEN $4 = 'DONE' THEN 1 END, CASE WHEN $4 = 'DONE' THEN 'exact' END)
		RETURNING id`, typ, stdb, rtyp, state, sent.Add(-time.Second), sentAt, timeout, closed).Scan(&id))
	return id
}

// requests reads the requests of the tests' transactions with timeout as
// every type's configured timeout.
func requests(tx pgx.Tx, msgID int64, timeout time.Duration) Requests {
	return Requests{Tx: tx, MsgID: msgID, Timeout: func(string) time.Duration { return timeout }}
}

// TestRequests_R_C7_R_D5_OpenMeansSentOrWaitingOfTheTypeOldestFirst: the
// requests a response may answer are the SENT and WAITING ones of its
// type — not one REGISTERED (not in the mailbox yet) or closed, nor one of
// another type, and for a reference RESP only those of its RTYP — oldest
// sent first, each with its deadline: timeout_at once armed, else sent_at
// plus the type's timeout (R-C7, R-D5; how a response picks among them is
// decide's TestRequests_*).
func TestRequests_R_C7_R_D5_OpenMeansSentOrWaitingOfTheTypeOldestFirst(t *testing.T) {
	t.Parallel()
	ctx, tx, _ := setup(t, 0)
	w := func(name string) string { return name + formatID(fresh()) } // scopes no other test opens
	window := w("late")
	late := addRequest(t, tx, "RQFD", window, "SENT", t0.Add(2*time.Second))
	early := addRequest(t, tx, "RQFD", w("early"), "WAITING", t0.Add(time.Second))
	addRequest(t, tx, "RQFD", w("registered"), "REGISTERED", t0)
	addRequest(t, tx, "RQFD", w("done"), "DONE", t0)
	addRequest(t, tx, "RQFD", w("expired"), "EXPIRED", t0)
	glst, slst := w("GLST"), w("SLST")
	g := addRequest(t, tx, "RQRD", glst, "WAITING", t0)
	s := addRequest(t, tx, "RQRD", slst, "SENT", t0.Add(time.Second))
	r := requests(tx, 0, 30*time.Second)

	open, err := r.OpenRequests(ctx, "RQFD", "")
	require.NoError(t, err)
	ids := func(rs []decide.Request) []int64 {
		var out []int64
		for _, q := range rs {
			out = append(out, q.ID)
		}
		return out
	}
	require.Equal(t, []int64{early, late}, ids(open))
	require.True(t, open[0].Deadline.Equal(t0.Add(time.Second+time.Minute)), "armed: timeout_at, %s", open[0].Deadline)
	require.True(t, open[1].Deadline.Equal(t0.Add(2*time.Second+30*time.Second)), "not armed yet: sent_at + timeout, %s", open[1].Deadline)
	require.True(t, open[1].SentAt.Equal(t0.Add(2*time.Second)))
	require.Equal(t, []string{window, window}, []string{open[1].STDB, open[1].STDE}, "the window as sent")

	open, err = r.OpenRequests(ctx, "RQRD", glst)
	require.NoError(t, err)
	require.Equal(t, []int64{g}, ids(open), "a reference RESP answers a request of its RTYP")
	open, err = r.OpenRequests(ctx, "RQRD", "")
	require.NoError(t, err)
	require.Equal(t, []int64{g, s}, ids(open))
}

// TestRequests_R_D5_CloseAnswersAnOpenRequestOnce: the answered request is
// made DONE with the response, its match and when, in the response's
// transaction; a request no longer open (answered, expired) is never
// changed again — the close fails with ErrRequestNotOpen — and its state
// and reason read as they were (R-D5: a late response never changes a
// closed request).
func TestRequests_R_D5_CloseAnswersAnOpenRequestOnce(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	open := addRequest(t, tx, "RQFD", "open"+formatID(base), "WAITING", t0)
	expired := addRequest(t, tx, "RQFD", "expired"+formatID(base), "EXPIRED", t0)
	r := requests(tx, base+1, time.Minute)
	at := t0.Add(10 * time.Second)
	op := decide.RequestClose{Type: "RQFD", ID: open, Kind: decide.MatchFallback, MsgID: base + 1, Now: at}

	require.NoError(t, r.CloseRequest(ctx, op))
	type closedRow struct {
		State, Kind, Reason string
		Response            int64
		At                  time.Time
	}
	read := func(id int64) closedRow {
		t.Helper()
		var c closedRow
		require.NoError(t, tx.QueryRow(ctx, `SELECT state, COALESCE(match_kind, ''), COALESCE(closed_reason, ''), COALESCE(response_msg_id, 0), closed_at
			FROM req_track WHERE id=$1`, id).Scan(&c.State, &c.Kind, &c.Reason, &c.Response, &c.At))
		c.At = c.At.UTC()
		return c
	}
	answered := closedRow{"DONE", "fallback", "answered by message " + formatID(base+1) + " (fallback match)", base + 1, at}
	require.Equal(t, answered, read(open))
	state, reason, found, err := r.RequestState(ctx, open)
	require.NoError(t, err)
	require.Equal(t, []any{"DONE", answered.Reason, true}, []any{state, reason, found})

	late := decide.RequestClose{Type: "RQFD", ID: open, Kind: decide.MatchExact, MsgID: base + 2, Now: at.Add(time.Second)}
	require.ErrorIs(t, r.CloseRequest(ctx, late), decide.ErrRequestNotOpen)
	require.Equal(t, answered, read(open), "still answered by the first response")
	before := read(expired)
	late.ID = expired
	require.ErrorIs(t, r.CloseRequest(ctx, late), decide.ErrRequestNotOpen)
	require.Equal(t, before, read(expired))

	_, _, found, err = r.RequestState(ctx, base+999_999_999)
	require.NoError(t, err)
	require.False(t, found, "a request purged after its retention is not found")
}

// TestRequests_R_D5_ReceivedAtIsTheMailboxTimeElseTheRegistration: a
// response's deadlines are judged by when it reached the mailbox, so one
// waiting behind a backlog still answers in time; without that time, by
// when the processor registered it (R-D5).
func TestRequests_R_D5_ReceivedAtIsTheMailboxTimeElseTheRegistration(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	received := t0.Add(-time.Minute)
	addMessage(t, tx, base+1, nil, &received)
	addMessage(t, tx, base+2, nil, nil)
	got, err := requests(tx, base+1, time.Minute).ReceivedAt(ctx)
	require.NoError(t, err)
	require.True(t, got.Equal(received), "%s", got)
	got, err = requests(tx, base+2, time.Minute).ReceivedAt(ctx)
	require.NoError(t, err)
	require.True(t, got.Equal(t0.Add(-time.Hour)), "registered at: %s", got)
}
