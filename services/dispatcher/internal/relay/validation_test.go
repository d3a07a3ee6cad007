package relay

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"msgexchange/libs/testutil"
)

// The validation scenarios of the seeds' tables (001 §6, 002 §8) that live
// in the dispatcher: the independence of the five facts, terminal states
// and local results untouched by failing side effects, the overdue bound R
// and identifiable redelivery. docs/reliability.md maps every row.

// procJSON is the whole proc_state row of a message without backfilled_at
// and backfill_outcome (the two columns the mailbox relay owns), to prove
// nothing else changed.
func (b *testBundle) procJSON(t *testing.T, msgID int64) string {
	t.Helper()
	var s string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (to_jsonb(p) - 'backfilled_at' - 'backfill_outcome')::text FROM proc_state p WHERE msg_id=$1`, msgID).Scan(&s))
	return s
}

// addEvent inserts an outbox row of target for message msgID (as the
// processor writes a flight change) and returns its ID.
func (b *testBundle) addEvent(t *testing.T, target string, msgID int64, flid string, payload []byte, headers string) int64 {
	t.Helper()
	var id int64
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at)
		VALUES ($1, $2, $3, $4::jsonb, $5, $6, $6) RETURNING id`, target, flid, payload, headers, msgID, b.clock.Now()).Scan(&id))
	return id
}

// eventPayload is a msg event as the processor writes it.
func eventPayload(flid, v int) []byte {
	return []byte(`{"event_id":"flight-` + strconv.Itoa(flid) + `-v` + strconv.Itoa(v) + `","flid":` + strconv.Itoa(flid) +
		`,"state_version":` + strconv.Itoa(v) + `}`)
}

func eventHeaders(flid, v int) string {
	return `{"msgx-event-id":"flight-` + strconv.Itoa(flid) + `-v` + strconv.Itoa(v) + `"}`
}

// TestValidation_INV1_INV6_INV16_MarkerDoesNotWaitForDelivery: the backfill
// reads nothing of the delivery state. A message whose msg event ended in
// the dead-letter queue still gets its marker, and its terminal state (and
// every other column of its record) stays as it was (INV-1 "回填不引用投递",
// INV-6 "投递失败后终态不变", INV-16 "外部副作用失败后本地结果不变").
//
// Validation 001§6 INV-1, INV-6, INV-16; 002§8 "投递确认丢失、批次失败、次数耗尽"
// (DEAD kept).
func TestValidation_INV1_INV6_INV16_MarkerDoesNotWaitForDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.producer(t, b.kcfg.Topics.Msg)
	msgID := b.insertMailbox(t, time.Time{}, "VALID")
	intent := b.addIntent(t, msgID)
	event := b.addEvent(t, TargetMsg, msgID, "15", eventPayload(15, 1), eventHeaders(15, 1))
	before := b.procJSON(t, msgID)

	remove := b.failProduce(b.kcfg.Topics.Msg)
	defer remove()
	for i := 0; i < 3; i++ {
		_, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg)
		require.Error(t, err)
		b.clock.Advance(4 * time.Second)
	}
	require.Equal(t, "DEAD", b.row(t, event).State, "the event is in the dead-letter queue")
	require.Equal(t, before, b.procJSON(t, msgID), "a delivery failure changes nothing of the record (INV-6, INV-16)")

	_, err := b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, OutcomeWritten, b.row(t, intent).Outcome, "the marker does not look at the delivery (INV-1)")
	processed, _ := b.marker(t, msgID)
	require.True(t, processed.Valid)
	require.NotNil(t, b.backfilledAt(t, msgID))
	require.Equal(t, before, b.procJSON(t, msgID), "the marker sets backfilled_at and backfill_outcome only")
	require.Equal(t, "DEAD", b.row(t, event).State, "the dead letter is kept for the operators (INV-10)")
}

// TestValidation_INV1_INV6_INV16_DeliveryDoesNotWaitForMarker: delivery
// reads nothing of the backfill. With the mailbox down (markers failing)
// and with a mailbox row gone (marker abandoned), the messages' flight-state
// and msg events are still delivered, and the records stay as they were
// (INV-1 "投递不引用回填", INV-6, INV-16 "回填失败不回滚本地结果").
//
// Validation 001§6 INV-1, INV-6, INV-16; 002§8 "PG 提交失败、信箱回填失败"
// (a failed marker is only retried as a marker, the business is not replayed).
func TestValidation_INV1_INV6_INV16_DeliveryDoesNotWaitForMarker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msgCl := b.producer(t, b.kcfg.Topics.Msg)
	fsCl := b.producer(t, b.kcfg.Topics.FlightState)
	down := b.insertMailbox(t, time.Time{}, "VALID")
	const gone = 990002
	downIntent := b.addIntent(t, down)
	goneIntent := b.addIntent(t, gone)
	events := []int64{
		b.addEvent(t, TargetMsg, down, "15", eventPayload(15, 1), eventHeaders(15, 1)),
		b.addEvent(t, TargetFlightState, down, "15", state(15, 1), versionHeaders(1)),
		b.addEvent(t, TargetMsg, gone, "16", eventPayload(16, 1), eventHeaders(16, 1)),
		b.addEvent(t, TargetFlightState, gone, "16", state(16, 1), versionHeaders(1)),
	}
	before := map[int64]string{down: b.procJSON(t, down), gone: b.procJSON(t, gone)}

	// The adapter refuses every update of the mailbox row: a transient
	// failure; the other row does not exist.
	_, err := b.mailbox.Exec(`CREATE TRIGGER cminmsgs_down BEFORE UPDATE ON CMINMSGS FOR EACH ROW
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'mailbox refuses writes'`)
	require.NoError(t, err)
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.ErrorContains(t, err, "mailbox refuses writes")
	require.Equal(t, "PENDING", b.row(t, downIntent).State)
	require.Equal(t, "ABANDONED", b.row(t, goneIntent).State)

	_, err = b.r.drainKafka(flushCtx(t), msgCl, TargetMsg)
	require.NoError(t, err)
	_, err = b.r.drainKafka(flushCtx(t), fsCl, TargetFlightState)
	require.NoError(t, err)
	require.Equal(t, []string{"SENT", "SENT", "SENT", "SENT"}, b.states(t, events...), "delivery does not look at the markers (INV-1)")
	require.Len(t, b.consume(t, b.kcfg.Topics.Msg, 2), 2)
	require.Len(t, b.consume(t, b.kcfg.Topics.FlightState, 2), 2)
	for id, want := range before {
		require.Equal(t, want, b.procJSON(t, id), "message %d: a marker failure changes nothing of the record", id)
	}
	require.Nil(t, b.backfilledAt(t, down), "a failed marker leaves the backfill unfinished")
	require.NotNil(t, b.backfilledAt(t, gone), "an abandoned marker finishes the backfill (outcome abandoned)")

	// The mailbox is back: only the marker is written again; no event is
	// produced a second time (the business is not replayed).
	_, err = b.mailbox.Exec(`DROP TRIGGER cminmsgs_down`)
	require.NoError(t, err)
	b.clock.Advance(30 * time.Second)
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, OutcomeWritten, b.row(t, downIntent).Outcome)
	require.Equal(t, []string{"SENT", "SENT", "SENT", "SENT"}, b.states(t, events...))
	for _, id := range events {
		require.Equal(t, 1, b.row(t, id).Attempts, "outbox row %d produced once", id)
	}
	require.Equal(t, before[down], b.procJSON(t, down))
}

// TestMailbox_R_D4_INV7_OverdueStopsRetriesAtR: a marker that keeps failing
// stops automatic retries as soon as it fails more than R
// (pipeline.overdue-backfill) after its message finished — long before
// backfill-max-attempts — as DEAD with outcome "overdue" and alert
// "backfill-overdue", never treated as marked; an operator can re-queue it.
// The age is the intent's created_at (our clock when the terminal state was
// written), never the mailbox's CMINMSGS_DATE_RECEIVED: a row whose
// received time is NULL and a row whose received time is weeks old behave
// the same. A marker that succeeds after R is simply written.
//
// Validation 001§6 INV-7 "回填四种结果" (temporary failure persisting until R),
// INV-7 "RECEIVED_AT 为 NULL"; 002§8 "回填四种结果", "RECEIVED_AT 为 NULL"; R-D4, CLM-4.
func TestMailbox_R_D4_INV7_OverdueStopsRetriesAtR(t *testing.T) {
	t.Parallel()
	const r = 24 * time.Hour
	logs := &testutil.LogBuffer{}
	b := setup(t, func(o *Options) {
		o.OverdueBackfill = r
		o.BackfillMaxAttempts = 100
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	nullReceived := b.insertMailbox(t, time.Time{}, "VALID")
	_, err := b.mailbox.Exec(`UPDATE CMINMSGS SET CMINMSGS_DATE_RECEIVED=NULL WHERE CMINMSGS_ID=?`, nullReceived)
	require.NoError(t, err)
	oldReceived := b.insertMailbox(t, time.Time{}, "VALID")
	_, err = b.mailbox.Exec(`UPDATE CMINMSGS SET CMINMSGS_DATE_RECEIVED=? WHERE CMINMSGS_ID=?`, testNow.Add(-40*24*time.Hour), oldReceived)
	require.NoError(t, err)
	late := b.insertMailbox(t, time.Time{}, "VALID")
	stuck := []int64{nullReceived, oldReceived}
	_, err = b.mailbox.Exec(`CREATE TRIGGER cminmsgs_stuck BEFORE UPDATE ON CMINMSGS FOR EACH ROW
		IF OLD.CMINMSGS_ID IN (` + strconv.FormatInt(stuck[0], 10) + `, ` + strconv.FormatInt(stuck[1], 10) + `) THEN
			SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'row locked by the adapter';
		END IF`)
	require.NoError(t, err)
	intents := []int64{b.addIntent(t, stuck[0]), b.addIntent(t, stuck[1])}

	// Failing within R: ordinary backoff, whatever the mailbox's clock says.
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.ErrorContains(t, err, "row locked by the adapter")
	for _, id := range intents {
		r := b.row(t, id)
		require.Equal(t, "PENDING", r.State, "a weeks-old or NULL received time does not make a marker overdue")
		require.Equal(t, 1, r.Attempts)
	}
	require.NotContains(t, logs.String(), "backfill-overdue")

	// Just before R: still retried.
	b.clock.Advance(r - time.Second)
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.Error(t, err)
	for _, id := range intents {
		require.Equal(t, "PENDING", b.row(t, id).State)
		require.Equal(t, 2, b.row(t, id).Attempts)
	}

	// At R the next failure stops automatic retries at once (attempt 3 of 100).
	lateIntent := b.addIntent(t, late) // finished now: R does not apply to it
	b.clock.Advance(15 * time.Minute)
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.Error(t, err)
	for i, id := range intents {
		r := b.row(t, id)
		require.Equal(t, "DEAD", r.State)
		require.Equal(t, OutcomeOverdue, r.Outcome)
		require.Equal(t, 3, r.Attempts)
		require.Contains(t, r.LastError, "row locked by the adapter")
		require.Nil(t, b.backfilledAt(t, stuck[i]), "never treated as marked")
		processed, _ := b.marker(t, stuck[i])
		require.False(t, processed.Valid)
	}
	require.Contains(t, logs.String(), `"alert":"backfill-overdue"`)
	require.Equal(t, OutcomeWritten, b.row(t, lateIntent).Outcome)

	// Stopped: no automatic retry, however long we wait.
	b.clock.Advance(24 * time.Hour)
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, 3, b.row(t, intents[0]).Attempts)

	// A marker that works after R is written: R only ends failing retries.
	afterR := b.insertMailbox(t, time.Time{}, "VALID")
	afterRIntent := b.addIntent(t, afterR)
	b.exec(t, `UPDATE outbox SET created_at = created_at - interval '48 hours' WHERE id=$1`, afterRIntent)
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	require.Equal(t, OutcomeWritten, b.row(t, afterRIntent).Outcome)

	// The operator fixes the mailbox and re-queues (as RequeueOutbox does):
	// the markers are written.
	_, err = b.mailbox.Exec(`DROP TRIGGER cminmsgs_stuck`)
	require.NoError(t, err)
	b.exec(t, `UPDATE outbox SET state='PENDING', attempts=0, next_attempt_at=$2, outcome=NULL WHERE id = ANY($1)`, intents, b.clock.Now())
	_, err = b.r.DrainMailbox(flushCtx(t))
	require.NoError(t, err)
	for i, id := range intents {
		require.Equal(t, OutcomeWritten, b.row(t, id).Outcome)
		require.NotNil(t, b.backfilledAt(t, stuck[i]))
	}
}

// TestKafkaRelay_INV_10_LostAckIsRedeliveredWithTheSameEventID: the broker
// accepted a batch but recording it as sent failed (the "ack" is lost): the
// rows stay PENDING and the next drain produces them again — a redelivery
// the consumer can identify, because it carries the same event_id (payload
// and msgx-event-id header). A transaction carries one row of a key, so
// the redelivery repeats only the key's latest event and the key never
// steps back (INV-10, C-29, R-L3): v1 v1 v2, never v1 v2 v1 v2.
//
// Validation 001§6 INV-10; 002§8 "投递确认丢失、批次失败、次数耗尽" (identifiable
// redelivery; batch backoff and DEAD: TestSchd_R_D2_FailedBatchBacksOffAsAWholeAndGoesDead,
// TestKafkaRelay_R_D2_FailedRowBacksOffThenGoesDead).
func TestKafkaRelay_INV_10_LostAckIsRedeliveredWithTheSameEventID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.producer(t, b.kcfg.Topics.Msg)
	rows := []int64{
		b.addEvent(t, TargetMsg, 1, "15", eventPayload(15, 1), eventHeaders(15, 1)),
		b.addEvent(t, TargetMsg, 1, "15", eventPayload(15, 2), eventHeaders(15, 2)),
	}
	// Recording SENT fails once, after the produce succeeded.
	b.exec(t, `CREATE TABLE test_lose_ack (armed boolean NOT NULL)`)
	b.exec(t, `INSERT INTO test_lose_ack VALUES (true)`)
	b.exec(t, `CREATE FUNCTION test_lose_ack() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.state = 'SENT' AND (SELECT armed FROM test_lose_ack) THEN
				RAISE EXCEPTION 'connection lost before the ack was recorded';
			END IF;
			RETURN NEW;
		END $$`)
	b.exec(t, `CREATE TRIGGER test_lose_ack BEFORE UPDATE ON outbox FOR EACH ROW EXECUTE FUNCTION test_lose_ack()`)

	_, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg)
	require.ErrorContains(t, err, "marking outbox rows sent")
	require.Equal(t, []string{"PENDING", "PENDING"}, b.states(t, rows...))
	require.Len(t, b.consume(t, b.kcfg.Topics.Msg, 1), 1, "the broker has the first event")

	b.exec(t, `UPDATE test_lose_ack SET armed=false`)
	for more := true; more; {
		more, err = b.r.drainKafka(flushCtx(t), cl, TargetMsg)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"SENT", "SENT"}, b.states(t, rows...))

	recs := b.consume(t, b.kcfg.Topics.Msg, 3)
	require.Len(t, recs, 3)
	var ids []string
	for _, r := range recs {
		require.Equal(t, "15", string(r.Key))
		ids = append(ids, header(r, "msgx-event-id"))
	}
	require.Equal(t, []string{"flight-15-v1", "flight-15-v1", "flight-15-v2"}, ids,
		"the redelivery repeats the latest event, with its event ID, and never steps back")
	require.Equal(t, string(recs[0].Value), string(recs[1].Value))
}
