package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/pgtest"
)

// TestExecutor_R_M2_RoundTripsPerBatch holds a batch of FLOPs to the
// executor's round trips to PostgreSQL, what a slow path multiplies: with
// 200 ms added to each, every one costs the batch 200 ms (R-M2). A batch
// that follows another, its head marked by the hand-over of the one
// before, takes two: the batch's transaction (BEGIN with the loads; the
// writes with the hand-over to the next head, the fence, COMMIT and, read
// after COMMIT, the next step's heads and replay flag). The batch needs no
// head read of its own (the batch before read its heads after its COMMIT,
// prefetchHeads) and no marker of its own (the hand-over marked its head
// through its last message, procstate.HandOver.Ahead; one round trip more
// when more messages arrived meanwhile). Each statement sent with COMMIT
// checks in SQL what the commit depends on (lease.SendAtCommit); checked
// by the client, with a head read and a marker of its own, a batch took
// six.
func TestExecutor_R_M2_RoundTripsPerBatch(t *testing.T) {
	t.Parallel()
	h, rt := countedHarness(t, func(o *Options) {
		o.Batch = 50
	})
	h.run(1, schd(1, "DNLD", fltr(1001, day23)))
	send := func(from int) {
		for i := range 100 {
			h.insert(int64(from+i), flopMsg(int64(from+i), "STND", flopRec(1001, fmt.Sprintf("<STND>%d</STND>", from+i))))
		}
	}
	send(100) // warms every statement of a batch up, on every connection
	h.drain()
	send(300)
	progressed, _ := h.step()
	require.True(t, progressed)
	before := rt.N()
	progressed, _ = h.step()
	require.True(t, progressed)
	require.Equal(t, int64(2), rt.N()-before, "round trips of a batch of 50 FLOPs")
	require.Equal(t, StateApplied, h.state(399))
}

// TestAcks_R_M2_RoundTripsPerAckBatch holds a batch of acks to its round
// trips to PostgreSQL, each one 200 ms of every message's way to its
// marker on a slow path (R-M2): two — BEGIN with the offsets and the lock
// of the acknowledged messages; the deletion of their satisfied
// projections and their SUCCEEDED states with the fence and COMMIT —
// however many messages the acks finish. The lock still comes first and
// the decision after it, each a statement of its own (R-H4). Read and
// decided by the client between the statements, it took five.
func TestAcks_R_M2_RoundTripsPerAckBatch(t *testing.T) {
	t.Parallel()
	h, rt := countedHarness(t, nil)
	h.run(1, schd(1, "DNLD", fltr(1001, day23), fltr(1002, day23)))
	h.ack(Ack{FLID: 1001, Version: 1}, Ack{FLID: 1002, Version: 1})
	for i := range int64(40) {
		h.insert(10+i, flopMsg(10+i, "STND", flopRec(1001+i%2, fmt.Sprintf("<STND>%d</STND>", i))))
	}
	h.drain()
	var acks []Ack
	for i := range int64(40) {
		acks = append(acks, Ack{FLID: 1001 + i%2, Version: 2 + i/2})
	}
	h.ack(acks[:20]...) // warms the statements up, on every connection
	before := rt.N()
	h.ack(acks[20:]...)
	require.Equal(t, int64(2), rt.N()-before, "round trips of a batch of 20 acks")
	for i := range int64(40) {
		require.Equal(t, StateSucceeded, h.state(10+i))
	}
}

// TestSnapshot_R_K4_R_M2_RoundTripsDoNotGrowWithFlights: a step of a daily
// snapshot reads its flights in one round trip and writes their changes in
// one, so a step of 100 flights costs the round trips of a step of 10, and
// deleting 99 absent flights those of deleting 9. Read and written one by
// one, 20,000 flights took about 80,000 round trips: 15 s on a local
// PostgreSQL (R-K4's bound is 12 s end to end), hours at +200 ms (R-M2).
func TestSnapshot_R_K4_R_M2_RoundTripsDoNotGrowWithFlights(t *testing.T) {
	t.Parallel()
	h, rt := countedHarness(t, func(o *Options) {
		o.SnapshotBatch = 100
	})
	const day25 = "25JAN210535"
	costOf := func(id int64, raw string) int64 {
		t.Helper()
		before := rt.N()
		h.run(id, raw)
		require.Equal(t, StateApplied, h.state(id), h.proc(id).Reason)
		return rt.N() - before
	}
	day := func(first, n int64, sodt string) []string {
		var out []string
		for f := first; f < first+n; f++ {
			out = append(out, fltr(f, sodt))
		}
		return out
	}
	// Every statement of a step, creating and deleting, on every
	// connection the steps take.
	for i := range int64(3) {
		costOf(1+2*i, schd(1+2*i, "DNLD", day(500, 3, day25)...))
		costOf(2+2*i, schd(2+2*i, "DNLD", day(500, 1, day25)...))
	}
	small := costOf(10, schd(10, "DNLD", day(1000, 10, day23)...))
	large := costOf(11, schd(11, "DNLD", day(2000, 100, day24)...))
	t.Logf("round trips: 10 flights %d, 100 flights %d", small, large)
	require.LessOrEqual(t, large, small+2, "a step of 100 new flights costs the round trips of a step of 10")
	fewGone := costOf(12, schd(12, "DNLD", day(1000, 1, day23)...))
	manyGone := costOf(13, schd(13, "DNLD", day(2000, 1, day24)...))
	t.Logf("round trips: 9 deleted %d, 99 deleted %d", fewGone, manyGone)
	require.LessOrEqual(t, manyGone, fewGone+2, "deleting 99 absent flights costs the round trips of deleting 9")
	require.Equal(t, 1+1+1, h.count(`SELECT count(*) FROM flight WHERE state = 'ACTIVE'`), "one flight of each day left")
}

// TestBatch_R_M2_R_J1_RolledBackBatchIsSearchedInHalves: a batch that a
// statement of one message rolls back runs again in halves, halving at
// each rollback and doubling at each commit, so the message at fault runs
// alone and is charged alone after about log2(batch) transactions — not
// one transaction per message before it, which with PostgreSQL 200 ms away
// took minutes for a batch (R-M2). Every other message applies.
func TestBatch_R_M2_R_J1_RolledBackBatchIsSearchedInHalves(t *testing.T) {
	t.Parallel()
	const n, fault = 256, 200 // the failing message is the batch's 200th
	h := newHarness(t, func(o *Options) { o.Batch = n })
	raw := func(id int64) string { return envelope(id, "LDM", "ADD", "<LDM/>") }
	h.registerMany(1, fault-1, raw)
	h.insert(fault, infraRaw)
	h.registerMany(fault+1, n-fault, raw)
	steps := 0
	for h.state(fault) != StateFailed {
		progressed, _ := h.step()
		require.True(t, progressed, "the executor moves until the message at fault is charged")
		steps++
		require.LessOrEqual(t, steps, 20, "steps to charge the message at fault in a batch of %d", n)
	}
	var attempts int
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT attempts FROM proc_state WHERE msg_id = $1`, fault).Scan(&attempts))
	require.Equal(t, 1, attempts, "charged once, alone")
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE msg_id < $1 AND state <> 'SKIPPED'`, fault),
		"every message before it finished")
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE msg_id <> $1 AND attempts > 0`, fault), "and none of them was charged")
	t.Logf("message at fault charged after %d steps", steps)
}

// TestAcks_R_H4_SatisfiedProjectionWrittenAfterTheLockIsFinishedToo: a
// message whose pending projection an ack satisfies, committed after the
// ack transaction locked the messages it knew of and before its deletion
// (its deletion sees the projection, its lock did not hold the message),
// is finished by the same acks in a transaction of their own: SUCCEEDED
// with nothing pending, not left APPLIED where no later ack reaches it.
func TestAcks_R_H4_SatisfiedProjectionWrittenAfterTheLockIsFinishedToo(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(1001, day23)))
	h.insert(2, flopMsg(2, "STND", flopRec(1001, "<STND>S2</STND>")))
	h.drain()
	require.Equal(t, StateApplied, h.state(2))
	h.insert(3, flopMsg(3, "STND", flopRec(1001, "<STND>S3</STND>")))
	h.exec(`UPDATE proc_state SET state = 'APPLIED', applied_at = now() WHERE msg_id = 3`)
	var once sync.Once
	ctx := withHook(context.Background(), hookAcksLocked, func(context.Context, pgx.Tx, int64) {
		// Message 3 stands for one whose projection, satisfied by the ack,
		// committed after the lock: a pending projection of flight 1001 at
		// a version the ack covers. The acks' own transaction only.
		once.Do(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := h.pool.Exec(cctx, `INSERT INTO projection_pending (msg_id, flid, version) VALUES (3, 1001, 2)`)
			require.NoError(t, err)
		})
	})
	require.NoError(t, h.e.ApplyAcks(ctx, []Ack{{FLID: 1001, Version: 2}}))
	require.Equal(t, StateSucceeded, h.state(2))
	require.Equal(t, StateSucceeded, h.state(3), "finished by the same acks, not left APPLIED")
	require.Zero(t, h.count(`SELECT count(*) FROM projection_pending`))
}

// countedHarness is a harness whose pool counts its round trips to
// PostgreSQL (pgtest.Count); opt, if not nil, sets further options.
func countedHarness(t *testing.T, opt func(*Options)) (*harness, *pgtest.RoundTrips) {
	t.Helper()
	var rt *pgtest.RoundTrips
	h := newHarness(t, func(o *Options) {
		cfg := o.Pool.Config()
		rt = pgtest.Count(&cfg.ConnConfig.Config)
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		o.Pool = pool
		if opt != nil {
			opt(o)
		}
	})
	return h, rt
}
