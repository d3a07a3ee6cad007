package relay

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// insertMailbox adds a CMINMSGS row, marked at processed when it is not
// zero, and returns its ID.
func (b *testBundle) insertMailbox(t *testing.T, processed time.Time, status string) int64 {
	t.Helper()
	var p any
	if !processed.IsZero() {
		p = processed
	}
	res, err := b.mailbox.Exec(`INSERT INTO CMINMSGS (CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS)
		VALUES ('<MSG/>', ?, ?, ?)`, testNow.Add(-time.Hour), p, status)
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	return id
}

// addIntent inserts a terminal proc_state row and its backfill intent (an
// outbox row of target mailbox) as the processor does, and returns the
// outbox row's ID.
func (b *testBundle) addIntent(t *testing.T, msgID int64) int64 {
	t.Helper()
	b.exec(t, `INSERT INTO proc_state (msg_id, state, raw, kafka_offset, finished_at) VALUES ($1, 'SUCCEEDED', '<MSG/>', $1, $2)`, msgID, b.clock.Now())
	var id int64
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at) VALUES ('mailbox', $1, $2, $3, $3) RETURNING id`,
		strconv.FormatInt(msgID, 10), msgID, b.clock.Now()).Scan(&id))
	return id
}

// marker reads a mailbox row's marker.
func (b *testBundle) marker(t *testing.T, msgID int64) (sql.NullTime, string) {
	t.Helper()
	var processed sql.NullTime
	var status sql.NullString
	require.NoError(t, b.mailbox.QueryRow(`SELECT CMINMSGS_DATE_PROCESSED, CMINMSGS_STATUS FROM CMINMSGS WHERE CMINMSGS_ID=?`, msgID).Scan(&processed, &status))
	return processed, status.String
}

func (b *testBundle) backfilledAt(t *testing.T, msgID int64) *time.Time {
	t.Helper()
	var at *time.Time
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT backfilled_at FROM proc_state WHERE msg_id=$1`, msgID).Scan(&at))
	return at
}

// TestMailbox_R_D4_Outcomes: the marker outcomes that need no retry
// (R-D4, INV-7, INV-8): an empty marker is written; an existing marker is a
// success left untouched; a missing mailbox row is abandoned at once, never
// treated as marked, stays in the abandoned list, and finishes its
// message's backfill with outcome abandoned (R-I2: MsgxUnmarkedBacklogOld
// clears).
//
// Validation 001§6 INV-7 "回填四种结果"; 002§8 "回填四种结果".
// Validation 002§8 "回填公平性".
//
// Also names C-5, C-15, INV-7.
func TestMailbox_R_D4_Outcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	earlier := time.Date(2026, 2, 28, 8, 0, 0, 0, airport)
	unmarked := b.insertMailbox(t, time.Time{}, "VALID")
	marked := b.insertMailbox(t, earlier, "DONE-ELSEWHERE")
	const missing = 990001

	written := b.addIntent(t, unmarked)
	already := b.addIntent(t, marked)
	abandoned := b.addIntent(t, missing)
	more, err := b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	require.False(t, more)

	t.Run("Written", func(t *testing.T) {
		processed, status := b.marker(t, unmarked)
		require.True(t, processed.Valid)
		require.True(t, processed.Time.Equal(testNow), "marker %v is now, in the airport zone", processed.Time)
		require.Equal(t, "PROCESSED", status)
		r := b.row(t, written)
		require.Equal(t, "SENT", r.State)
		require.Equal(t, OutcomeWritten, r.Outcome)
		require.NotNil(t, b.backfilledAt(t, unmarked))
	})
	t.Run("AlreadyMarkedIsUntouched", func(t *testing.T) {
		processed, status := b.marker(t, marked)
		require.True(t, processed.Time.Equal(earlier))
		require.Equal(t, "DONE-ELSEWHERE", status)
		r := b.row(t, already)
		require.Equal(t, "SENT", r.State)
		require.Equal(t, OutcomeAlreadyMarked, r.Outcome)
		require.NotNil(t, b.backfilledAt(t, marked))
	})
	t.Run("RowMissingIsAbandonedAndListed", func(t *testing.T) {
		r := b.row(t, abandoned)
		require.Equal(t, "ABANDONED", r.State)
		require.Equal(t, OutcomeRowMissing, r.Outcome)
		require.Equal(t, testNow, r.SentAt.UTC(), "sent_at records when it was abandoned")
		// Never treated as marked, but finished: the backfill ends with
		// outcome abandoned, so the unmarked backlog (and its alert) lets
		// it go while the abandoned list keeps it.
		require.Equal(t, testNow, b.backfilledAt(t, missing).UTC())
		var outcome string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT backfill_outcome FROM proc_state WHERE msg_id=$1`, missing).Scan(&outcome))
		require.Equal(t, BackfillAbandoned, outcome)
		var unmarked int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM proc_state WHERE finished_at IS NOT NULL AND backfilled_at IS NULL`).Scan(&unmarked))
		require.Zero(t, unmarked, "no message waits for a marker")
		var listed []int64
		rows, err := b.pool.Query(context.Background(), `SELECT msg_id FROM outbox WHERE target='mailbox' AND state='ABANDONED' ORDER BY id`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			listed = append(listed, id)
		}
		require.Equal(t, []int64{missing}, listed)
	})
	t.Run("NothingIsRetried", func(t *testing.T) {
		b.clock.Advance(time.Hour)
		_, err := b.r.DrainMailbox(flushCtx(t))
		require.NoError(t, err)
		require.Equal(t, []string{"SENT", "SENT", "ABANDONED"}, b.states(t, written, already, abandoned))
	})
}

// TestMailbox_R_L5_R_M1_MarkerIsNeverWrittenOntoAnIDHandedOutAgain: the
// mailbox's database failed over to a replica that lacked its newest rows,
// and AUTO_INCREMENT handed their IDs out again to new messages. A marker
// intent of a message read from a lost row then finds, under its ID,
// another message — one nothing processed. The marker is written only onto
// the row the message was read from (its CMINMSGS_DATE_RECEIVED as
// registered): the reissued row stays unmarked, for ingest to register as
// a reused ID (R-L5), and the intent is abandoned and listed like a
// missing row's. A row received when its message says is marked, in the
// same batch and one by one; a message registered without a receive time
// is marked by its ID, as before.
func TestMailbox_R_L5_R_M1_MarkerIsNeverWrittenOntoAnIDHandedOutAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// received registers msgID's message as read with the receive time at.
	received := func(msgID int64, at *time.Time) {
		b.exec(t, `UPDATE proc_state SET received_at = $2 WHERE msg_id = $1`, msgID, at)
	}
	lostAt := time.Date(2026, 3, 1, 19, 59, 58, 0, airport)
	same := b.insertMailbox(t, time.Time{}, "VALID") // received testNow − 1 h
	sameIntent := b.addIntent(t, same)
	sameAt := testNow.Add(-time.Hour)
	received(same, &sameAt)
	unknown := b.insertMailbox(t, time.Time{}, "VALID")
	unknownIntent := b.addIntent(t, unknown)

	// The lost row's ID, handed out again: the row under it now is a
	// message inserted after the failover.
	reissued := b.insertMailbox(t, time.Time{}, "VALID")
	_, err := b.mailbox.ExecContext(ctx, `UPDATE CMINMSGS SET CMINMSGS_CLOB_MSG = '<MSG>after the failover</MSG>', CMINMSGS_DATE_RECEIVED = ? WHERE CMINMSGS_ID = ?`,
		lostAt.Add(7*time.Second), reissued)
	require.NoError(t, err)
	reissuedIntent := b.addIntent(t, reissued)
	received(reissued, &lostAt)
	// And one whose row has no receive time at all now.
	blank := b.insertMailbox(t, time.Time{}, "VALID")
	_, err = b.mailbox.ExecContext(ctx, `UPDATE CMINMSGS SET CMINMSGS_DATE_RECEIVED = NULL WHERE CMINMSGS_ID = ?`, blank)
	require.NoError(t, err)
	blankIntent := b.addIntent(t, blank)
	received(blank, &lostAt)

	more, err := b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	require.False(t, more)

	for _, id := range []int64{reissued, blank} {
		processed, status := b.marker(t, id)
		require.False(t, processed.Valid, "row %d, another message under the ID, stays unmarked", id)
		require.Equal(t, "VALID", status)
		var outcome string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT backfill_outcome FROM proc_state WHERE msg_id=$1`, id).Scan(&outcome))
		require.Equal(t, BackfillAbandoned, outcome, "the message's backfill ends abandoned")
	}
	for _, intent := range []int64{reissuedIntent, blankIntent} {
		r := b.row(t, intent)
		require.Equal(t, "ABANDONED", r.State)
		require.Equal(t, OutcomeRowReplaced, r.Outcome)
	}
	for _, id := range []int64{same, unknown} {
		processed, status := b.marker(t, id)
		require.True(t, processed.Valid, "row %d marked", id)
		require.Equal(t, "PROCESSED", status)
	}
	require.Equal(t, []string{"SENT", "SENT"}, b.states(t, sameIntent, unknownIntent))

	t.Run("OneByOne", func(t *testing.T) {
		// The row-by-row path (after a batch the mailbox refused) reads the
		// same receive times.
		again := b.insertMailbox(t, time.Time{}, "VALID")
		b.addIntent(t, again)
		received(again, &lostAt)
		out, err := b.r.mark(ctx, markRow{id: again, received: &lostAt})
		require.NoError(t, err)
		require.Equal(t, OutcomeRowReplaced, out)
		processed, _ := b.marker(t, again)
		require.False(t, processed.Valid)
		out, err = b.r.mark(ctx, markRow{id: again, received: &sameAt})
		require.NoError(t, err)
		require.Equal(t, OutcomeWritten, out, "received at testNow − 1 h, in the airport zone")
	})
}

// TestMailbox_R_D4_TransientFailureBacksOffThenGivesUp: a failure the
// mailbox answers for the row (here a rule of the adapter's refuses its
// update: not an outage, and not a refusal of the account or a missing
// table, which stall the loop instead — see R-L2, R-L8) backs off 30 s,
// doubling, is not retried before it is due, and stops at
// backfill-max-attempts as DEAD "gave-up" for an operator to resume
// (R-D4).
//
// Validation 001§6 INV-7 "回填四种结果"; 002§8 "回填四种结果".
// Validation 001§6 INV-8 "PG 提交失败、回填失败"; 002§8 "PG 提交失败、信箱回填失败".
func TestMailbox_R_D4_TransientFailureBacksOffThenGivesUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msgID := b.insertMailbox(t, time.Time{}, "VALID")
	id := b.addIntent(t, msgID)
	_, err := b.mailbox.Exec(`CREATE TRIGGER cminmsgs_refused BEFORE UPDATE ON CMINMSGS FOR EACH ROW
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'CMINMSGS row refused by the adapter'`)
	require.NoError(t, err)

	steps := []struct {
		wantAttempts int
		wantWait     time.Duration // 0: given up
	}{{1, 30 * time.Second}, {2, 60 * time.Second}, {3, 0}}
	for _, st := range steps {
		_, err := b.r.DrainMailbox(flushCtx(t))
		require.ErrorContains(t, err, "writing markers")
		r := b.row(t, id)
		require.Equal(t, st.wantAttempts, r.Attempts)
		require.Contains(t, r.LastError, "CMINMSGS")
		if st.wantWait == 0 {
			require.Equal(t, "DEAD", r.State)
			require.Equal(t, OutcomeGaveUp, r.Outcome)
			break
		}
		require.Equal(t, "PENDING", r.State)
		require.Equal(t, b.clock.Now().Add(st.wantWait), r.NextAttempt.UTC())
		// Just before it is due, nothing is tried.
		b.clock.Advance(st.wantWait - time.Second)
		_, err = b.r.DrainMailbox(flushCtx(t))
		require.NoError(t, err)
		require.Equal(t, st.wantAttempts, b.row(t, id).Attempts)
		b.clock.Advance(time.Second)
	}

	// Given up: automatic retries stop even when the mailbox is back.
	_, err = b.mailbox.Exec(`DROP TRIGGER cminmsgs_refused`)
	require.NoError(t, err)
	b.clock.Advance(time.Hour)
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	processed, _ := b.marker(t, msgID)
	require.False(t, processed.Valid)
	require.Nil(t, b.backfilledAt(t, msgID))
}

// TestMailbox_R_D4_FailingRowsDoNotStarveOthers: rows that fail every time
// rotate behind the others instead of filling every batch (fair rotation,
// R-D4).
//
// Validation 002§8 "回填公平性".
func TestMailbox_R_D4_FailingRowsDoNotStarveOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Batch = 2; o.BackfillMaxAttempts = 100 })
	stuck := []int64{b.insertMailbox(t, time.Time{}, "VALID"), b.insertMailbox(t, time.Time{}, "VALID")}
	// The adapter rejects every update of the two stuck rows.
	_, err := b.mailbox.Exec(`CREATE TRIGGER cminmsgs_stuck BEFORE UPDATE ON CMINMSGS FOR EACH ROW
		IF OLD.CMINMSGS_ID IN (` + strconv.FormatInt(stuck[0], 10) + `, ` + strconv.FormatInt(stuck[1], 10) + `) THEN
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'row locked by the adapter';
		END IF`)
	require.NoError(t, err)
	stuckIntents := []int64{b.addIntent(t, stuck[0]), b.addIntent(t, stuck[1])}

	_, err = b.r.DrainMailbox(flushCtx(t))
	require.ErrorContains(t, err, "row locked by the adapter")

	// The stuck rows are due again before a fresh row arrives, and a batch
	// holds only two rows: the fresh row is still written within two
	// drains, while the stuck ones keep retrying.
	b.clock.Advance(31 * time.Second)
	freshMsg := b.insertMailbox(t, time.Time{}, "VALID")
	fresh := b.addIntent(t, freshMsg)
	for i := 0; i < 2; i++ {
		_, _ = b.r.DrainMailbox(flushCtx(t))
	}
	require.Equal(t, OutcomeWritten, b.row(t, fresh).Outcome)
	processed, _ := b.marker(t, freshMsg)
	require.True(t, processed.Valid)
	for _, id := range stuckIntents {
		r := b.row(t, id)
		require.Equal(t, "PENDING", r.State)
		require.Equal(t, 2, r.Attempts)
	}
}

// TestSameReceipt_R_L5_ComparesTheMailboxWallClockToTheSecond: the row
// check of a marker compares the receive time as the mailbox shows it, in
// its zone, to the second — ingest registers it to the second, and the
// same instant written in another zone is the same receipt — and trusts
// the ID alone only where no time was registered.
func TestSameReceipt_R_L5_ComparesTheMailboxWallClockToTheSecond(t *testing.T) {
	row := time.Date(2026, 3, 1, 20, 0, 5, 0, airport) // as the driver reads a DATETIME
	at := func(tm time.Time) *time.Time { return &tm }
	for _, tc := range []struct {
		name string
		want *time.Time
		got  sql.NullTime
		same bool
	}{
		{"the same wall clock", at(row), sql.NullTime{Time: row, Valid: true}, true},
		{"the same instant in UTC", at(row.UTC()), sql.NullTime{Time: row, Valid: true}, true},
		{"a fraction the registration does not keep", at(row), sql.NullTime{Time: row.Add(700 * time.Millisecond), Valid: true}, true},
		{"a second later", at(row), sql.NullTime{Time: row.Add(time.Second), Valid: true}, false},
		{"an hour earlier", at(row), sql.NullTime{Time: row.Add(-time.Hour), Valid: true}, false},
		{"no time on the row", at(row), sql.NullTime{}, false},
		{"none registered", nil, sql.NullTime{Time: row, Valid: true}, true},
		{"none on either side", nil, sql.NullTime{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.same, sameReceipt(tc.want, tc.got))
		})
	}
}
