package relay

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func flushCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSchd_R_D1_CoalescesChangesToTheLatestStatePerFLID: several changes of
// one FLID between flushes produce ONE record with the latest state, and
// every row that record represents is marked SENT together (R-D1, US-08).
func TestSchd_R_D1_CoalescesChangesToTheLatestStatePerFLID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd))
	ids15 := []int64{
		b.addRow(t, TargetSchd, "15", state(15, 1), versionHeaders(1)),
		b.addRow(t, TargetSchd, "15", state(15, 2), versionHeaders(2)),
	}
	id16 := b.addRow(t, TargetSchd, "16", state(16, 1), versionHeaders(1))
	ids15 = append(ids15, b.addRow(t, TargetSchd, "15", state(15, 3), versionHeaders(3)))
	other := b.addRow(t, TargetMsg, "15", []byte(`{}`), "")

	res, err := s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, FlushResult{Records: 2, RowsSent: 4}, res)

	recs := b.consume(t, b.kcfg.Topics.Schd, 2)
	keyed := byKey(recs)
	require.Len(t, keyed["15"], 1)
	require.Len(t, keyed["16"], 1)
	require.JSONEq(t, string(state(15, 3)), string(keyed["15"][0].Value))
	require.Equal(t, "3", header(keyed["15"][0], "msgx-version"))
	require.Equal(t, "103", header(keyed["15"][0], "msgx-msg-id"))
	require.JSONEq(t, string(state(16, 1)), string(keyed["16"][0].Value))

	for i, id := range ids15 {
		r := b.row(t, id)
		require.Equal(t, "SENT", r.State)
		require.Equal(t, testNow, r.SentAt.UTC())
		if i == len(ids15)-1 {
			require.Equal(t, OutcomeProduced, r.Outcome)
		} else {
			require.Equal(t, OutcomeCoalesced, r.Outcome)
		}
	}
	require.Equal(t, OutcomeProduced, b.row(t, id16).Outcome)
	require.Equal(t, "PENDING", b.row(t, other).State, "other targets are not the schd relay's")

	t.Run("NothingPendingProducesNothing", func(t *testing.T) {
		res, err := s.FlushOnce(flushCtx(t))
		require.NoError(t, err)
		require.Equal(t, FlushResult{}, res)
	})
	t.Run("ALaterChangeIsTheNextRecordInOrder", func(t *testing.T) {
		id := b.addRow(t, TargetSchd, "15", state(15, 4), versionHeaders(4))
		res, err := s.FlushOnce(flushCtx(t))
		require.NoError(t, err)
		require.Equal(t, FlushResult{Records: 1, RowsSent: 1}, res)
		require.Equal(t, "SENT", b.row(t, id).State)
		got := byKey(b.consume(t, b.kcfg.Topics.Schd, 3))["15"]
		require.Len(t, got, 2)
		require.Equal(t, []string{"3", "4"}, []string{header(got[0], "msgx-version"), header(got[1], "msgx-version")})
	})
}

// TestSchd_R_D1_DeletedFlightIsATombstone: a deletion as the latest state
// produces a record with a null value and the version header (R-D1).
func TestSchd_R_D1_DeletedFlightIsATombstone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd))
	b.addRow(t, TargetSchd, "15", state(15, 1), versionHeaders(1))
	del := b.addRow(t, TargetSchd, "15", nil, versionHeaders(2))
	b.addRow(t, TargetSchd, "16", state(16, 1), versionHeaders(1))

	res, err := s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, FlushResult{Records: 2, Tombstones: 1, RowsSent: 3}, res)
	keyed := byKey(b.consume(t, b.kcfg.Topics.Schd, 2))
	require.Len(t, keyed["15"], 1)
	require.Nil(t, keyed["15"][0].Value, "a deleted flight is a tombstone")
	require.Equal(t, "2", header(keyed["15"][0], "msgx-version"))
	require.NotNil(t, keyed["16"][0].Value)
	require.Equal(t, OutcomeProduced, b.row(t, del).Outcome)
}

// TestSchd_R_D1_FlushLimitBoundsABatch: at most flush-limit records per
// flush, the FLIDs whose latest rows are oldest first; the rest goes in the
// following flushes (R-D1).
func TestSchd_R_D1_FlushLimitBoundsABatch(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.SchdFlushLimit = 2 })
	s := b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd))
	for flid := 1; flid <= 5; flid++ {
		b.addRow(t, TargetSchd, strconv.Itoa(flid), state(flid, 1), versionHeaders(1))
	}
	// FLID 1 changes again: its latest row is now the newest of all.
	b.addRow(t, TargetSchd, "1", state(1, 2), versionHeaders(2))

	wantKeys := [][]string{{"2", "3"}, {"4", "5"}, {"1"}}
	total := 0
	seen := map[string]bool{}
	for i, want := range wantKeys {
		res, err := s.FlushOnce(flushCtx(t))
		require.NoError(t, err)
		require.Equal(t, len(want), res.Records, "flush %d", i)
		require.Equal(t, len(want) == 2, res.Full, "flush %d", i)
		total += res.Records
		var got []string
		for _, r := range b.consume(t, b.kcfg.Topics.Schd, total) {
			if k := string(r.Key); !seen[k] {
				seen[k] = true
				got = append(got, k)
			}
		}
		require.ElementsMatch(t, want, got, "flush %d", i)
	}
	res, err := s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, FlushResult{}, res)
}

// TestSchd_R_D2_FailedBatchBacksOffAsAWholeAndGoesDead: a failed produce
// marks nothing sent; every row of the batch (including the older rows a
// record represents) backs off from backoff-min doubling, is not retried
// before it is due, and becomes DEAD at max-attempts (R-D1, R-D2, INV-10).
//
// Validation 001§6 INV-10 "投递确认丢失、批次失败、次数耗尽"; 002§8 "投递确认丢失、批次失败、次数耗尽".
func TestSchd_R_D2_FailedBatchBacksOffAsAWholeAndGoesDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd))
	ids := []int64{
		b.addRow(t, TargetSchd, "15", state(15, 1), versionHeaders(1)),
		b.addRow(t, TargetSchd, "15", state(15, 2), versionHeaders(2)),
		b.addRow(t, TargetSchd, "16", nil, versionHeaders(4)),
	}
	remove := b.failProduce(b.kcfg.Topics.Schd)

	// Attempt 1 fails at t0: next attempt at t0+1s.
	_, err := s.FlushOnce(flushCtx(t))
	require.ErrorContains(t, err, "producing 2 schd records")
	for _, id := range ids {
		r := b.row(t, id)
		require.Equal(t, "PENDING", r.State)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, testNow.Add(time.Second), r.NextAttempt.UTC())
		require.Contains(t, r.LastError, "UNKNOWN_SERVER_ERROR")
	}
	// Not due yet: the flush does nothing.
	b.clock.Advance(999 * time.Millisecond)
	res, err := s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, FlushResult{}, res)
	require.Equal(t, 1, b.row(t, ids[0]).Attempts)

	// Attempt 2 fails at t0+1s: next at t0+3s (2 s later).
	b.clock.Advance(time.Millisecond)
	_, err = s.FlushOnce(flushCtx(t))
	require.Error(t, err)
	for _, id := range ids {
		r := b.row(t, id)
		require.Equal(t, 2, r.Attempts)
		require.Equal(t, testNow.Add(3*time.Second), r.NextAttempt.UTC())
	}
	// Attempt 3 fails: max-attempts reached, every row of the batch is DEAD.
	b.clock.Advance(2 * time.Second)
	_, err = s.FlushOnce(flushCtx(t))
	require.Error(t, err)
	require.Equal(t, []string{"DEAD", "DEAD", "DEAD"}, b.states(t, ids...))
	require.Equal(t, 3, b.row(t, ids[0]).Attempts)

	// The broker recovers: DEAD rows stay in the dead-letter queue, a new
	// change flows.
	remove()
	fresh := b.addRow(t, TargetSchd, "17", state(17, 1), versionHeaders(1))
	res, err = s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, FlushResult{Records: 1, RowsSent: 1}, res)
	require.Equal(t, "SENT", b.row(t, fresh).State)
	recs := b.consume(t, b.kcfg.Topics.Schd, 1)
	require.Equal(t, "17", string(recs[0].Key))
}

// TestSchd_INV_10_LatestStateOvertakesABackedOffOlderState: when a FLID's
// batch is backing off and the flight changes again, the new latest state
// is produced at once and represents the older rows, which are marked SENT
// with it; the older state is never produced after it (INV-10, C-29).
//
// Validation 001§6 INV-10 "投递确认丢失、批次失败、次数耗尽"; 002§8 "投递确认丢失、批次失败、次数耗尽".
func TestSchd_INV_10_LatestStateOvertakesABackedOffOlderState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd))
	old := b.addRow(t, TargetSchd, "15", state(15, 1), versionHeaders(1))
	remove := b.failProduce(b.kcfg.Topics.Schd)
	_, err := s.FlushOnce(flushCtx(t))
	require.Error(t, err)
	remove()

	latest := b.addRow(t, TargetSchd, "15", state(15, 2), versionHeaders(2))
	res, err := s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, FlushResult{Records: 1, RowsSent: 2}, res)
	require.Equal(t, OutcomeCoalesced, b.row(t, old).Outcome)
	require.Equal(t, OutcomeProduced, b.row(t, latest).Outcome)

	// Even once the old row's backoff has passed, nothing more is produced.
	b.clock.Advance(time.Minute)
	res, err = s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, FlushResult{}, res)
	recs := b.consume(t, b.kcfg.Topics.Schd, 1)
	require.Len(t, recs, 1)
	require.Equal(t, "2", header(recs[0], "msgx-version"))
}

// TestSchd_INV_10_RequeuedOlderStateIsSuperseded: an older row put back to
// PENDING (an operator re-queue of a DEAD row) after a newer state of its
// FLID was delivered is never produced: it would overwrite the newer state
// downstream. It is marked SENT as superseded (INV-10, R-D2).
func TestSchd_INV_10_RequeuedOlderStateIsSuperseded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd))
	old := b.addRow(t, TargetSchd, "15", state(15, 1), versionHeaders(1))
	b.exec(t, `UPDATE outbox SET state='DEAD', attempts=3 WHERE id=$1`, old)
	b.addRow(t, TargetSchd, "15", state(15, 2), versionHeaders(2))
	res, err := s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, 1, res.Records)

	b.exec(t, `UPDATE outbox SET state='PENDING', attempts=0 WHERE id=$1`, old)
	fresh := b.addRow(t, TargetSchd, "16", state(16, 1), versionHeaders(1))
	res, err = s.FlushOnce(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, FlushResult{Records: 1, RowsSent: 2, Superseded: 1}, res)
	r := b.row(t, old)
	require.Equal(t, "SENT", r.State)
	require.Equal(t, OutcomeSuperseded, r.Outcome)
	require.Equal(t, OutcomeProduced, b.row(t, fresh).Outcome)
	keyed := byKey(b.consume(t, b.kcfg.Topics.Schd, 2))
	require.Len(t, keyed["15"], 1, "the older state was not produced again")
	require.Equal(t, "2", header(keyed["15"][0], "msgx-version"))
}

// addSchdRows inserts n schd rows due now, keys cycling over flids FLIDs
// from first, each a state of 400 bytes.
func (b *testBundle) addSchdRows(t *testing.T, n, flids, first int) {
	t.Helper()
	b.exec(t, `INSERT INTO outbox (target, pkey, payload, headers, next_attempt_at, created_at)
		SELECT 'schd', ($3 + g % $2)::text, convert_to(repeat('x', 400), 'UTF8'), '{"msgx-version":"1"}'::jsonb, $4, $4
		FROM generate_series(1, $1) g`, n, flids, first, b.clock.Now())
}

// schdFlushCost is the buffers one flush's statements touch at the relay's
// floor: the select, and the marking of what it picked (which marks them).
func (b *testBundle) schdFlushCost(t *testing.T) (sel, mark int) {
	t.Helper()
	now, floor := b.clock.Now(), b.r.floors.peek(TargetSchd)
	sel = b.explainBuffers(t, schdSelect, now, b.r.opt.SchdFlushLimit, floor)
	rows, err := b.pool.Query(flushCtx(t), schdSelect, now, b.r.opt.SchdFlushLimit, floor)
	require.NoError(t, err)
	var ids, latest []int64
	var superseded []bool
	for rows.Next() {
		var l schdLatest
		var firstLeft, lastFresh *int64
		require.NoError(t, rows.Scan(&l.ID, &l.Key, &l.Payload, &l.Headers, &l.IDs, &l.Superseded, &firstLeft, &lastFresh))
		for _, id := range l.IDs {
			ids, latest, superseded = append(ids, id), append(latest, l.ID), append(superseded, l.Superseded)
		}
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, ids)
	return sel, b.explainBuffers(t, schdMarkSent, ids, latest, superseded, now)
}

// TestSchd_R_J5_FlushCostIndependentOfDeliveredHistory: with autovacuum off
// on the outbox, 50,000 schd rows of 2,000 FLIDs are delivered by the
// relay's own flushes; a flush of ten new changes of FLIDs with that history
// then costs what it costs on a fresh table (issue 11 item 4: the pending
// rows' partial index keeps a dead entry of every delivered row until
// vacuum, and the old DISTINCT ON over it, and the marking per FLID, walked
// them all). The same select from floor 0 is measured too, to show that the
// history left its dead entries in place.
func TestSchd_R_J5_FlushCostIndependentOfDeliveredHistory(t *testing.T) {
	t.Parallel()
	const delivered, flids, waiting = 50_000, 2_000, 10
	fresh := setup(t)
	fresh.exec(t, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	fresh.r.floors.listening(true)
	fresh.addSchdRows(t, waiting, waiting, 1)
	freshSel, freshMark := fresh.schdFlushCost(t)

	b := setup(t)
	b.exec(t, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	// The flushes run as under a connected listener: every insert of this
	// test commits before the flush that could pass it.
	b.r.floors.listening(true)
	b.addSchdRows(t, delivered, flids, 1)
	s := b.r.NewSchd(b.producer(t, b.kcfg.Topics.Schd))
	records := 0
	for {
		res, err := s.FlushOnce(flushCtx(t))
		require.NoError(t, err)
		records += res.Records
		if res.Records == 0 {
			break
		}
	}
	require.Equal(t, flids, records, "one record per FLID")
	var left int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE state <> 'SENT'`).Scan(&left))
	require.Zero(t, left, "every row delivered")

	b.addSchdRows(t, waiting, waiting, 1) // FLIDs 1..10, each with 25 delivered rows
	historySel, historyMark := b.schdFlushCost(t)
	t.Logf("buffers of a flush of %d changes (select + mark): fresh table %d + %d, after %d delivered %d + %d",
		waiting, freshSel, freshMark, delivered, historySel, historyMark)
	require.LessOrEqual(t, historySel+historyMark, 2*(freshSel+freshMark)+20,
		"a schd flush must not cost more after %d deliveries than on a fresh table", delivered)

	// Not vacuous: from floor 0 the fresh lane walks the delivered history.
	b.addSchdRows(t, waiting, waiting, 1)
	fromZero := b.explainBuffers(t, schdSelect, b.clock.Now(), b.r.opt.SchdFlushLimit, 0)
	t.Logf("the same select from floor 0: %d buffers", fromZero)
	require.Greater(t, fromZero, 10*historySel, "the delivered history left dead index entries behind")
}
