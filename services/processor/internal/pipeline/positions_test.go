package pipeline

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPositions_R_B2_R_M1_LostCommitsAreConsumedAgain: a consumer whose
// stored position is no longer the one it stored — PostgreSQL lost the
// commits after it, as a failover to a replica behind does — registers
// nothing and is told where the stored position is; idle, it finds the
// move within positionCheckIdle; the acks consumer likewise. The whole
// path, with a real failover, is TestChaos_R_M1_R_M3_PostgresFailoverToAReplicaBehind.
func TestPositions_R_B2_R_M1_LostCommitsAreConsumedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	rec := func(id, offset int64) *kgo.Record {
		return &kgo.Record{Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(refMsg(id, "GLST", "ADD", glst("G"+strconv.FormatInt(id, 10), "x"))), Offset: offset}
	}

	own := position{0: -1}
	require.NoError(t, h.e.registerFrom(ctx, inboxTopic, []*kgo.Record{rec(1, 0), rec(2, 1), rec(3, 2)}, own))
	own[0] = 3
	require.NoError(t, h.e.registerFrom(ctx, inboxTopic, []*kgo.Record{rec(4, 3)}, own), "the position stored last is the consumer's own")
	own[0] = 4

	// The commits of offsets 1…3 are lost: the stored position and their
	// registrations are what they were before them.
	h.exec(`UPDATE consumer_offset SET next_offset = 1 WHERE topic = $1`, inboxTopic)
	h.exec(`DELETE FROM proc_state WHERE msg_id IN (2, 3, 4)`)

	err := h.e.registerFrom(ctx, inboxTopic, []*kgo.Record{rec(5, 4)}, own)
	moved := asPositionMoved(err)
	require.NotNil(t, moved, "got %v", err)
	require.Equal(t, positionMoved{topic: inboxTopic, partition: 0, stored: 1, own: 4}, *moved)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM proc_state WHERE msg_id = 5`), "nothing is registered past a moved position")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM consumer_offset WHERE topic = $1 AND next_offset = 1`, inboxTopic))

	// Consumed again from the stored position, the lost records come back.
	own[0] = 1
	require.NoError(t, h.e.registerFrom(ctx, inboxTopic, []*kgo.Record{rec(2, 1), rec(3, 2), rec(4, 3), rec(5, 4)}, own))
	require.Equal(t, 5, h.count(`SELECT count(*) FROM proc_state`))

	// Idle: no record to register, the check reads the position itself.
	own[0] = 5
	var last time.Time
	require.Nil(t, h.e.idlePositionCheck(ctx, &last, inboxTopic, own))
	h.exec(`UPDATE consumer_offset SET next_offset = 3 WHERE topic = $1`, inboxTopic)
	require.Nil(t, h.e.idlePositionCheck(ctx, &last, inboxTopic, own), "checked at most once per positionCheckIdle")
	last = last.Add(-positionCheckIdle)
	moved = h.e.idlePositionCheck(ctx, &last, inboxTopic, own)
	require.NotNil(t, moved)
	require.Equal(t, int64(3), moved.stored)

	// The acks consumer: a partition with no stored position any more.
	const acks = "msgx.projection-acks"
	require.NoError(t, h.e.applyAcksFrom(ctx, nil, acks, map[int32]int64{0: 5, 1: 2}, position{0: -1, 1: -1}))
	require.NoError(t, h.e.applyAcksFrom(ctx, nil, acks, map[int32]int64{1: 4}, position{1: 2}))
	h.exec(`DELETE FROM consumer_offset WHERE topic = $1 AND partition = 1`, acks)
	moved = asPositionMoved(h.e.applyAcksFrom(ctx, nil, acks, map[int32]int64{1: 6}, position{1: 4}))
	require.NotNil(t, moved)
	require.Equal(t, positionMoved{topic: acks, partition: 1, stored: -1, own: 4}, *moved)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM consumer_offset WHERE topic = $1 AND partition = 1`, acks), "nothing stored past a moved position")
}
