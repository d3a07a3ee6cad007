package relay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKafkaRelay_INV_10_KeyHeldBackBehindARowInBackoff: a row whose key has
// an older row waiting in backoff is not produced before it; other keys go
// on; once the older row is due both go out in ID order, one per drain
// (INV-10, C-29, R-D2).
//
// Validation 001§6 INV-10 "投递确认丢失、批次失败、次数耗尽"; 002§8 "投递确认丢失、批次失败、次数耗尽".
func TestKafkaRelay_INV_10_KeyHeldBackBehindARowInBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.producer(t, b.kcfg.Topics.Msg)
	first := b.addRow(t, TargetMsg, "15", []byte(`{"state_version":1}`), `{"msgx-event-id":"flight-15-v1"}`)
	remove := b.failProduce(b.kcfg.Topics.Msg)
	_, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg)
	require.Error(t, err)
	remove()
	r := b.row(t, first)
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, testNow.Add(time.Second), r.NextAttempt.UTC())

	second := b.addRow(t, TargetMsg, "15", []byte(`{"state_version":2}`), `{"msgx-event-id":"flight-15-v2"}`)
	other := b.addRow(t, TargetMsg, "16", []byte(`{"state_version":1}`), `{"msgx-event-id":"flight-16-v1"}`)
	more, err := b.r.drainKafka(flushCtx(t), cl, TargetMsg)
	require.NoError(t, err)
	require.False(t, more)
	require.Equal(t, []string{"PENDING", "PENDING", "SENT"}, b.states(t, first, second, other))
	recs := b.consume(t, b.kcfg.Topics.Msg, 1)
	require.Equal(t, "16", string(recs[0].Key))
	require.Equal(t, "flight-16-v1", header(recs[0], "msgx-event-id"))

	b.clock.Advance(time.Second)
	more, err = b.r.drainKafka(flushCtx(t), cl, TargetMsg)
	require.NoError(t, err)
	require.True(t, more, "one row of a key per transaction: the second goes with the next drain")
	require.Equal(t, []string{"SENT", "PENDING", "SENT"}, b.states(t, first, second, other))
	_, err = b.r.drainKafka(flushCtx(t), cl, TargetMsg)
	require.NoError(t, err)
	require.Equal(t, []string{"SENT", "SENT", "SENT"}, b.states(t, first, second, other))
	got := byKey(b.consume(t, b.kcfg.Topics.Msg, 3))["15"]
	require.Len(t, got, 2)
	require.JSONEq(t, `{"state_version":1}`, string(got[0].Value))
	require.JSONEq(t, `{"state_version":2}`, string(got[1].Value))
}

// TestKafkaRelay_R_D2_FailedRowBacksOffThenGoesDead: a failing row backs
// off 1 s, 2 s, … and becomes DEAD (the dead-letter queue) at max-attempts;
// later rows of other keys are delivered meanwhile (R-D2).
//
// Validation 001§6 INV-10 "投递确认丢失、批次失败、次数耗尽"; 002§8 "投递确认丢失、批次失败、次数耗尽".
func TestKafkaRelay_R_D2_FailedRowBacksOffThenGoesDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.producer(t, b.kcfg.Topics.FlightState)
	id := b.addRow(t, TargetFlightState, "15", state(15, 1), versionHeaders(1))
	remove := b.failProduce(b.kcfg.Topics.FlightState)
	for attempt, wait := range []time.Duration{time.Second, 2 * time.Second, 0} {
		_, err := b.r.drainKafka(flushCtx(t), cl, TargetFlightState)
		require.Error(t, err)
		r := b.row(t, id)
		require.Equal(t, attempt+1, r.Attempts)
		require.Contains(t, r.LastError, "UNKNOWN_SERVER_ERROR")
		if wait == 0 {
			require.Equal(t, "DEAD", r.State)
			break
		}
		require.Equal(t, "PENDING", r.State)
		require.Equal(t, b.clock.Now().Add(wait), r.NextAttempt.UTC())
		b.clock.Advance(wait)
	}
	remove()
	fresh := b.addRow(t, TargetFlightState, "16", state(16, 1), versionHeaders(1))
	_, err := b.r.drainKafka(flushCtx(t), cl, TargetFlightState)
	require.NoError(t, err)
	require.Equal(t, []string{"DEAD", "SENT"}, b.states(t, id, fresh))
}
