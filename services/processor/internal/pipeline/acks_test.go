package pipeline

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAcks_R_B7_INV23_AppliedUntilEveryProjectionIsAcked: a flight-changing
// message is APPLIED with projection_pending rows; an ack of a lower version
// does nothing; an ack of (flid, v ≥ version) makes it SUCCEEDED with its
// backfill intent; repeated acks are harmless.
//
// Validation 001§6 INV-1 "五事实互不替代".
// Validation 001§6 INV-17b "同事务提交、晚于 Redis、日计划分批".
// Validation 001§6 INV-23 "Redis 写失败".
func TestAcks_R_B7_INV23_AppliedUntilEveryProjectionIsAcked(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	h.run(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))
	r := h.proc(1)
	require.Equal(t, StateApplied, r.State)
	require.NotNil(t, r.AppliedAt)
	require.Nil(t, r.FinishedAt)
	require.Equal(t, map[int64]int64{15: 1}, h.pending(1))
	require.Equal(t, map[int64]int64{15: 2}, h.pending(2))
	require.Equal(t, 0, h.mailboxRows(1))

	// Lower versions satisfy only what they cover.
	h.ack(Ack{FLID: 15, Version: 0})
	require.Equal(t, StateApplied, h.state(1))
	h.ack(Ack{FLID: 15, Version: 1})
	require.Equal(t, StateSucceeded, h.state(1))
	require.Equal(t, StateApplied, h.state(2))
	require.Equal(t, 1, h.mailboxRows(1))
	require.Equal(t, 0, h.mailboxRows(2))
	require.NotNil(t, h.proc(1).FinishedAt)

	// Repeated, unrelated and empty acks are harmless.
	h.ack(Ack{FLID: 15, Version: 1}, Ack{FLID: 15, Version: 1})
	h.ack(Ack{FLID: 999, Version: 7})
	h.ack()
	require.Equal(t, StateApplied, h.state(2))
	require.Equal(t, 1, h.mailboxRows(1))

	h.ack(Ack{FLID: 15, Version: 2})
	require.Equal(t, StateSucceeded, h.state(2))
	require.Equal(t, 1, h.mailboxRows(2))
	require.Zero(t, h.count(`SELECT count(*) FROM projection_pending`))
	h.ack(Ack{FLID: 15, Version: 2})
	require.Equal(t, 1, h.mailboxRows(2))
}

// TestAcks_R_B7_HigherVersionSatisfiesSkippedAndOutOfOrder: an ack of v
// satisfies every pending projection of that flight with version ≤ v, so a
// skipped intermediate ack and acks arriving out of order are harmless.
func TestAcks_R_B7_HigherVersionSatisfiesSkippedAndOutOfOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	h.run(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))
	h.run(3, flopMsg(3, "STND", flopRec(15, "<STND>S2</STND>")))
	h.ack(Ack{FLID: 15, Version: 3})
	for _, id := range []int64{1, 2, 3} {
		require.Equal(t, StateSucceeded, h.state(id), "message %d", id)
		require.Equal(t, 1, h.mailboxRows(id))
	}
	h.ack(Ack{FLID: 15, Version: 2}, Ack{FLID: 15, Version: 1})
	for _, id := range []int64{1, 2, 3} {
		require.Equal(t, 1, h.mailboxRows(id))
	}
}

// TestAcks_R_B7_MessageTouchingTwoFlightsNeedsBothAcks: a message that
// changed two flights stays APPLIED until both are acknowledged, in either
// order.
func TestAcks_R_B7_MessageTouchingTwoFlightsNeedsBothAcks(t *testing.T) {
	t.Parallel()
	for _, order := range [][]int64{{15, 16}, {16, 15}} {
		h := newHarness(t)
		h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
		require.Equal(t, map[int64]int64{15: 1, 16: 1}, h.pending(1))
		h.ack(Ack{FLID: order[0], Version: 1})
		require.Equal(t, StateApplied, h.state(1))
		require.Equal(t, 0, h.mailboxRows(1))
		require.Equal(t, map[int64]int64{order[1]: 1}, h.pending(1))
		h.ack(Ack{FLID: order[1], Version: 1})
		require.Equal(t, StateSucceeded, h.state(1))
		require.Equal(t, 1, h.mailboxRows(1))
	}
	// Both acks in one batch work as well.
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
	h.ack(Ack{FLID: 16, Version: 1}, Ack{FLID: 15, Version: 1})
	require.Equal(t, StateSucceeded, h.state(1))
	require.Equal(t, 1, h.mailboxRows(1))
}

// TestAcks_R_B7_SameFlightTwiceInOneMessageWaitsForTheLastVersion: a message
// that bumped one flight twice waits for an ack of its last version.
func TestAcks_R_B7_SameFlightTwiceInOneMessageWaitsForTheLastVersion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	h.run(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>"), flopRec(15, "<STND>S2</STND>")))
	require.Equal(t, int64(3), h.flight(15).Version)
	require.Equal(t, map[int64]int64{15: 3}, h.pending(2))
	h.ack(Ack{FLID: 15, Version: 2})
	require.Equal(t, StateApplied, h.state(2))
	h.ack(Ack{FLID: 15, Version: 3})
	require.Equal(t, StateSucceeded, h.state(2))
}

// TestAcks_R_B7_OffsetsStoredWithTheAcks: applyAcks stores the consumer
// positions in the same transaction, also for a batch without usable acks.
func TestAcks_R_B7_OffsetsStoredWithTheAcks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	require.NoError(t, h.e.applyAcks(ctx, nil, "msgx.projection-acks", map[int32]int64{0: 5, 2: 9}))
	require.NoError(t, h.e.applyAcks(ctx, []Ack{{FLID: 15, Version: 1}}, "msgx.projection-acks", map[int32]int64{0: 6}))
	require.Equal(t, StateSucceeded, h.state(1))
	var p0, p2 int64
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT next_offset FROM consumer_offset WHERE consumer='processor' AND topic='msgx.projection-acks' AND partition=0`).Scan(&p0))
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT next_offset FROM consumer_offset WHERE consumer='processor' AND topic='msgx.projection-acks' AND partition=2`).Scan(&p2))
	require.Equal(t, int64(6), p0)
	require.Equal(t, int64(9), p2)
}

// TestAcks_R_B7_RedisOutageBlocksNothing: unacknowledged projections do not
// hold up later messages in PostgreSQL.
//
// Validation 001§6 INV-16 "外部副作用失败后本地结果不变".
// Validation 001§6 INV-23 "Redis 写失败".
func TestAcks_R_B7_RedisOutageBlocksNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, schd(1, "DNLD", fltr(15, day23)))
	h.insert(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))
	h.insert(3, refMsg(3, "GLST", "ADD", glst("G1", "a")))
	h.drain()
	require.Equal(t, StateApplied, h.state(1))
	require.Equal(t, StateApplied, h.state(2))
	require.Equal(t, StateSucceeded, h.state(3))
}
