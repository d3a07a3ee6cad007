package relay

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/sisrequest"
)

// registerRequest writes a request REGISTERED with its outbox row, as the
// control plane does, and returns the request's ID and the outbox row's
// ID: an RQFD for 2026-03-02 or an RQRD of GLST.
func (b *testBundle) registerRequest(t *testing.T, typ string, seqn int64) (reqID, outboxID int64) {
	t.Helper()
	return b.registerRequestOf(t, typ, "GLST", seqn)
}

// registerRequestOf is registerRequest with the reference type of an
// RQRD: requests of different types are open side by side.
func (b *testBundle) registerRequestOf(t *testing.T, typ, refType string, seqn int64) (reqID, outboxID int64) {
	t.Helper()
	env := sisrequest.Envelope{Seqn: seqn, Created: b.clock.Now().In(airport)}
	var xml []byte
	var err error
	var stdb, stde, rtyp any
	if typ == sisrequest.TypeRQFD {
		stdb, stde = "20260302", "20260302"
		xml, err = sisrequest.EncodeRQFD(env, "20260302", "20260302")
	} else {
		rtyp = refType
		xml, err = sisrequest.EncodeRQRD(env, refType)
	}
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `
		INSERT INTO req_track (type, stdb, stde, rtyp, sender, seqn, xml, operator, reason, registered_at)
		VALUES ($1, $2, $3, $4, 'VIEW', $5, $6, 'ops', 'test', $7) RETURNING id`,
		typ, stdb, stde, rtyp, strconv.FormatInt(seqn, 10), string(xml), b.clock.Now()).Scan(&reqID))
	outboxID = b.addRow(t, TargetCoutmsgs, strconv.FormatInt(reqID, 10), xml, "")
	return reqID, outboxID
}

// request is a req_track row as the dispatcher tests check it.
type request struct {
	State        string
	OutboundID   *int64
	SentAt       *time.Time
	ClosedReason *string
}

func (b *testBundle) request(t *testing.T, id int64) request {
	t.Helper()
	var r request
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state, outbound_id, sent_at, closed_reason FROM req_track WHERE id=$1`, id).
		Scan(&r.State, &r.OutboundID, &r.SentAt, &r.ClosedReason))
	return r
}

// coutOutbox is the state of one coutmsgs outbox row.
type coutOutbox struct {
	State, Outcome, LastError string
	Attempts                  int
	NextAttempt               time.Time
}

func (b *testBundle) coutOutbox(t *testing.T, id int64) coutOutbox {
	t.Helper()
	var o coutOutbox
	var outcome, lastErr *string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state, outcome, last_error, attempts, next_attempt_at FROM outbox WHERE id=$1`, id).
		Scan(&o.State, &outcome, &lastErr, &o.Attempts, &o.NextAttempt))
	if outcome != nil {
		o.Outcome = *outcome
	}
	if lastErr != nil {
		o.LastError = *lastErr
	}
	return o
}

// coutRow is one COUTMSGS row with every column.
type coutRow struct {
	ID                                               int64
	Clob                                             string
	Inserted                                         string // as stored, airport local time
	Sent, AckRecv                                    sql.NullTime
	Routing                                          string
	TrueFals, FinalGroup, AckReqd, Resend, Encr, Err int
	NoMessages, GroupOrder, GroupID                  sql.NullInt64
}

func (b *testBundle) coutRows(t *testing.T) []coutRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := b.mailbox.QueryContext(ctx, `
		SELECT COUTMSGS_ID, COUTMSGS_CLOB_MSG, CAST(COUTMSGS_DATE_INSERTED AS CHAR), COUTMSGS_DATE_SENT, COUTMSGS_ACK_DATE_RECV, ROUTINGID,
		       COUTMSGS_TRUEFALS_GROUP, COUTMSGS_FINAL_GROUP_IND, COUTMSGS_ACK_REQD, COUTMSGS_ACK_RESEND_TIMES, COUTMSGS_ENCRYPT, COUTMSGS_ERROR,
		       COUTMSGS_NO_MESSAGES, COUTMSGS_GROUP_ORDER, COUTMSGS_GROUP_ID
		FROM COUTMSGS ORDER BY COUTMSGS_ID`)
	require.NoError(t, err)
	defer rows.Close()
	var out []coutRow
	for rows.Next() {
		var c coutRow
		require.NoError(t, rows.Scan(&c.ID, &c.Clob, &c.Inserted, &c.Sent, &c.AckRecv, &c.Routing,
			&c.TrueFals, &c.FinalGroup, &c.AckReqd, &c.Resend, &c.Encr, &c.Err, &c.NoMessages, &c.GroupOrder, &c.GroupID))
		out = append(out, c)
	}
	require.NoError(t, rows.Err())
	return out
}

func drainCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestCoutmsgs_R_D5_G_REQ_TRACK_InsertsRequestThenMarksSent: each request
// becomes one COUTMSGS row with the documented columns (sis-catalogue §8):
// the XML, DATE_INSERTED = now in airport time, ROUTINGID VIEWRQFD or
// VIEWRQRD, the tinyint flags 0 and the rest NULL; only then are the outbox
// row SENT and the request SENT with its COUTMSGS_ID.
func TestCoutmsgs_R_D5_G_REQ_TRACK_InsertsRequestThenMarksSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rqfd, rqfdRow := b.registerRequest(t, sisrequest.TypeRQFD, 1)
	rqrd, rqrdRow := b.registerRequest(t, sisrequest.TypeRQRD, 2)
	require.Equal(t, "REGISTERED", b.request(t, rqfd).State)

	b.clock.Advance(1500 * time.Millisecond) // 20:00:01.5 airport time
	more, err := b.r.DrainCoutmsgs(drainCtx(t))
	require.NoError(t, err)
	require.False(t, more)

	rows := b.coutRows(t)
	require.Len(t, rows, 2)
	for i, want := range []struct {
		reqID, rowID int64
		routing      string
	}{{rqfd, rqfdRow, "VIEWRQFD"}, {rqrd, rqrdRow, "VIEWRQRD"}} {
		c := rows[i]
		require.Equal(t, want.routing, c.Routing)
		require.Equal(t, "2026-03-01 20:00:01", c.Inserted, "now, in airport time, whole seconds")
		require.False(t, c.Sent.Valid, "DATE_SENT is the AODB side's")
		require.False(t, c.AckRecv.Valid)
		require.Zero(t, c.TrueFals+c.FinalGroup+c.AckReqd+c.Resend+c.Encr+c.Err)
		require.False(t, c.NoMessages.Valid || c.GroupOrder.Valid || c.GroupID.Valid)

		var xml string
		require.NoError(t, b.pool.QueryRow(drainCtx(t), `SELECT xml FROM req_track WHERE id=$1`, want.reqID).Scan(&xml))
		require.Equal(t, xml, c.Clob, "the XML exactly as registered")

		r := b.request(t, want.reqID)
		require.Equal(t, "SENT", r.State)
		require.NotNil(t, r.OutboundID)
		require.Equal(t, c.ID, *r.OutboundID)
		require.NotNil(t, r.SentAt)
		require.True(t, r.SentAt.Equal(testNow.Add(1500*time.Millisecond)))
		o := b.coutOutbox(t, want.rowID)
		require.Equal(t, "SENT", o.State)
		require.Equal(t, OutcomeWritten, o.Outcome)
	}

	// Nothing is sent twice.
	_, err = b.r.DrainCoutmsgs(drainCtx(t))
	require.NoError(t, err)
	require.Len(t, b.coutRows(t), 2)
}

// TestCoutmsgs_C_24_NoDuplicateAfterCrashBetweenInsertAndMarking: an attempt
// that inserted the row but crashed before recording it leaves the outbox
// row PENDING and the request REGISTERED; the retry finds the identical
// row (same ROUTINGID and XML) and records its ID instead of inserting a
// second one.
func TestCoutmsgs_C_24_NoDuplicateAfterCrashBetweenInsertAndMarking(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reqID, rowID := b.registerRequest(t, sisrequest.TypeRQRD, 7)
	other, _ := b.registerRequest(t, sisrequest.TypeRQFD, 8)
	var xml []byte
	require.NoError(t, b.pool.QueryRow(drainCtx(t), `SELECT payload FROM outbox WHERE id=$1`, rowID).Scan(&xml))

	// The crashed attempt: the insert happened, nothing was recorded.
	crashedID, reused, err := b.r.insertCoutmsgs(drainCtx(t), sisrequest.RoutingRQRD, xml, testNow.Add(-time.Hour))
	require.NoError(t, err)
	require.False(t, reused)
	require.Equal(t, "REGISTERED", b.request(t, reqID).State, "not SENT before the marking")
	require.Equal(t, "PENDING", b.coutOutbox(t, rowID).State)

	b.clock.Advance(time.Minute) // the restarted dispatcher
	_, err = b.r.DrainCoutmsgs(drainCtx(t))
	require.NoError(t, err)
	rows := b.coutRows(t)
	require.Len(t, rows, 2, "one row per request, none duplicated")
	r := b.request(t, reqID)
	require.Equal(t, "SENT", r.State)
	require.Equal(t, crashedID, *r.OutboundID, "the earlier row's ID is recorded")
	require.Equal(t, OutcomeReused, b.coutOutbox(t, rowID).Outcome)
	require.Equal(t, "SENT", b.request(t, other).State)
	require.NotEqual(t, crashedID, *b.request(t, other).OutboundID)
}

// TestCoutmsgs_R_D2_FailureBacksOffThenDeadExpiresRequest: while the
// mailbox refuses the row (a rule of the adapter's: not an outage, and not
// a refusal of the account or a missing COUTMSGS, which stall the loop
// instead, R-L8) the row backs off (1 s doubling) and the request stays
// REGISTERED; after max-attempts the row is DEAD (dead-letter) and the
// request EXPIRED as undeliverable. Before that, a recovered mailbox gets
// the row.
//
// Validation 001§6 INV-16 "外部副作用失败后本地结果不变".
func TestCoutmsgs_R_D2_FailureBacksOffThenDeadExpiresRequest(t *testing.T) {
	t.Parallel()
	b := setup(t) // max-attempts 3, backoff 1 s .. 4 s
	reqID, rowID := b.registerRequest(t, sisrequest.TypeRQFD, 1)
	ctx := drainCtx(t)
	_, err := b.mailbox.ExecContext(ctx, `CREATE TRIGGER coutmsgs_refused BEFORE INSERT ON COUTMSGS FOR EACH ROW
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'COUTMSGS row refused by the adapter'`)
	require.NoError(t, err)

	_, err = b.r.DrainCoutmsgs(ctx)
	require.Error(t, err)
	o := b.coutOutbox(t, rowID)
	require.Equal(t, "PENDING", o.State)
	require.Equal(t, 1, o.Attempts)
	require.True(t, o.NextAttempt.Equal(testNow.Add(time.Second)), "backoff 1 s")
	require.Contains(t, o.LastError, "COUTMSGS")
	require.Equal(t, "REGISTERED", b.request(t, reqID).State)

	_, err = b.r.DrainCoutmsgs(ctx)
	require.NoError(t, err, "not due yet: nothing tried")
	require.Equal(t, 1, b.coutOutbox(t, rowID).Attempts)

	b.clock.Advance(time.Second)
	_, err = b.r.DrainCoutmsgs(ctx)
	require.Error(t, err)
	o = b.coutOutbox(t, rowID)
	require.Equal(t, 2, o.Attempts)
	require.True(t, o.NextAttempt.Equal(testNow.Add(3*time.Second)), "backoff 2 s")

	b.clock.Advance(2 * time.Second)
	_, err = b.r.DrainCoutmsgs(ctx)
	require.Error(t, err)
	o = b.coutOutbox(t, rowID)
	require.Equal(t, "DEAD", o.State)
	require.Equal(t, 3, o.Attempts)
	r := b.request(t, reqID)
	require.Equal(t, "EXPIRED", r.State)
	require.Contains(t, *r.ClosedReason, "undeliverable: ")
	require.Nil(t, r.OutboundID)

	// A recovered mailbox takes the next request at once.
	_, err = b.mailbox.ExecContext(ctx, `DROP TRIGGER coutmsgs_refused`)
	require.NoError(t, err)
	next, nextRow := b.registerRequest(t, sisrequest.TypeRQFD, 2)
	_, err = b.r.DrainCoutmsgs(ctx)
	require.NoError(t, err)
	require.Equal(t, "SENT", b.request(t, next).State)
	require.Equal(t, "SENT", b.coutOutbox(t, nextRow).State)
	require.Len(t, b.coutRows(t), 1, "the dead row is not retried automatically")
}

// TestCoutmsgs_R_D5_SupersededRequestIsNotSent: a request that was expired
// (superseded by a newer one of its scope) before the dispatcher reached
// it is not inserted; its outbox row is ABANDONED with the reason. A
// vanished request is abandoned too.
func TestCoutmsgs_R_D5_SupersededRequestIsNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old, oldRow := b.registerRequest(t, sisrequest.TypeRQRD, 1)
	b.exec(t, `UPDATE req_track SET state='EXPIRED', closed_at=$2, closed_reason='superseded by request 99' WHERE id=$1`, old, testNow)
	gone, goneRow := b.registerRequest(t, sisrequest.TypeRQFD, 2)
	b.exec(t, `DELETE FROM req_track WHERE id=$1`, gone)

	_, err := b.r.DrainCoutmsgs(drainCtx(t))
	require.NoError(t, err)
	require.Empty(t, b.coutRows(t))
	o := b.coutOutbox(t, oldRow)
	require.Equal(t, "ABANDONED", o.State)
	require.Equal(t, OutcomeRequestClosed, o.Outcome)
	r := b.request(t, old)
	require.Equal(t, "EXPIRED", r.State, "a closed request is never changed")
	require.Equal(t, "superseded by request 99", *r.ClosedReason)
	require.Equal(t, OutcomeRequestMissing, b.coutOutbox(t, goneRow).Outcome)
}
