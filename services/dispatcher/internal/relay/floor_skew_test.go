package relay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKafkaRelay_R_M6_R_J5_RowOfAWriterAheadIsNotPassedByTheFloor: a writer
// whose clock runs ahead of the dispatcher's commits a fresh row that is
// not due yet on the dispatcher's clock, followed by a due row. The drain
// delivers the due row but its fresh-lane floor stays below the early row,
// so that the row goes out as soon as the dispatcher's clock reaches it —
// without waiting for a reconnection of the listener, the only other thing
// that rescans from the start.
func TestKafkaRelay_R_M6_R_J5_RowOfAWriterAheadIsNotPassedByTheFloor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.r.floors.listening(true) // notifications arrive: the floor moves
	cl := b.producer(t, b.kcfg.Topics.FlightState)
	const skew = 3 * time.Second
	var early int64
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	writerNow := b.clock.Now().Add(skew)
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO outbox (target, pkey, payload, headers, msg_id, next_attempt_at, created_at)
		VALUES ($1, '15', $2, $3::jsonb, NULL, $4, $4) RETURNING id`, TargetFlightState, state(15, 1), versionHeaders(1), writerNow).Scan(&early))
	due := b.addRow(t, TargetFlightState, "16", state(16, 1), versionHeaders(1))

	_, err := b.r.drainKafka(flushCtx(t), cl, TargetFlightState)
	require.NoError(t, err)
	require.Equal(t, []string{"PENDING", "SENT"}, b.states(t, early, due), "the row not yet due waits, the due one goes")
	require.Less(t, b.r.floors.peek(TargetFlightState), early, "the floor stays below the row not yet due")

	b.clock.Advance(skew)
	_, err = b.r.drainKafka(flushCtx(t), cl, TargetFlightState)
	require.NoError(t, err)
	require.Equal(t, []string{"SENT", "SENT"}, b.states(t, early, due), "once due on the dispatcher's clock the row is delivered")
	got := byKey(b.consume(t, b.kcfg.Topics.FlightState, 2))
	require.Len(t, got["15"], 1)
	require.Len(t, got["16"], 1)
}
