package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// explainBuffers runs sql under EXPLAIN (ANALYZE, BUFFERS) in a
// transaction that is rolled back, and returns the shared buffers the
// statement touched (hit and read).
func (h *harness) explainBuffers(sql string, args ...any) int {
	h.t.Helper()
	ctx := context.Background()
	tx, err := h.pool.Begin(ctx)
	require.NoError(h.t, err)
	defer func() { require.NoError(h.t, tx.Rollback(ctx)) }()
	var out []byte
	require.NoError(h.t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, args...).Scan(&out))
	var plans []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	require.NoError(h.t, json.Unmarshal(out, &plans))
	require.Len(h.t, plans, 1)
	return plans[0].Plan.Hit + plans[0].Plan.Read
}

// headLookupBuffers is what the engine's two head lookups cost now, with
// its current floor: loading the heads (loadHeads) and handing the marker
// to the next head (markNext, for the first of them).
func (h *harness) headLookupBuffers() (heads, next int) {
	h.t.Helper()
	floor, _ := h.e.floor.read()
	heads = h.explainBuffers(headsSQL, h.e.batchSize(), floor, int64(0), headsRawBudget)
	next = h.explainBuffers(markNextSQL, int64(0), h.e.instance, h.clk.Now(), int64(0), floor, h.e.batchSize())
	return heads, next
}

// registerMany registers ids as fetched batches of 500 records.
func (h *harness) registerMany(first, n int64, raw func(id int64) string) {
	h.t.Helper()
	var recs []*kgo.Record
	for id := first; id < first+n; id++ {
		recs = append(recs, &kgo.Record{Key: []byte(strconv.FormatInt(id, 10)), Value: []byte(raw(id))})
		if len(recs) == 500 || id == first+n-1 {
			h.insertRecords(recs...)
			recs = nil
		}
	}
}

// TestHead_R_J5_LookupCostIndependentOfFinishedHistory: with autovacuum
// off on proc_state, 50,000 finished messages leave 50,000 dead entries in
// the index of open messages. After the executor has run once past them,
// finding the head (loadHeads and markNext, as the engine runs them, with
// its floor) touches about as many buffers as on a fresh table holding the
// same open messages; the lookup without the floor walks the dead entries.
func TestHead_R_J5_LookupCostIndependentOfFinishedHistory(t *testing.T) {
	t.Parallel()
	const history = 50_000
	open := func(h *harness, first int64) {
		for id := first; id < first+3; id++ {
			h.insert(id, flopMsg(id, "STND", flopRec(4242, "<STND>1</STND>"))) // stays PENDING: never stepped
		}
	}
	fresh := newHarness(t, func(o *Options) { o.Batch = DefaultBatch })
	fresh.exec(`ALTER TABLE proc_state SET (autovacuum_enabled = false)`)
	open(fresh, 1)
	freshHeads, freshNext := fresh.headLookupBuffers()

	h := newHarness(t, func(o *Options) { o.Batch = DefaultBatch })
	h.exec(`ALTER TABLE proc_state SET (autovacuum_enabled = false)`)
	// The history: 50,000 messages registered PENDING, then finished — by
	// SQL, since registration is not what is measured: a row inserted
	// open and then finished leaves its dead entry in the index of open
	// messages all the same.
	h.exec(`INSERT INTO proc_state (msg_id, raw, received_at, kafka_offset, registered_at, updated_at)
		SELECT g, $1, $2, g, $2, $2 FROM generate_series(1, $3::bigint) AS g`, envelope(1, "LDM", "ADD", "<LDM/>"), t0, history)
	h.offset = history + 1
	h.exec(`UPDATE proc_state SET state='SKIPPED', finished_at=$1, backfilled_at=$1 WHERE msg_id <= $2`, t0, history)
	// The executor's own work on top: batches and single messages.
	h.registerMany(history+1, 600, func(id int64) string { return envelope(id, "LDM", "ADD", "<LDM/>") })
	h.insert(history+601, infraRaw) // rolls its batch back, FAILED, then retried alone
	h.registerMany(history+602, 300, func(id int64) string { return envelope(id, "LDM", "ADD", "<LDM/>") })
	for i := 0; i < 10 && h.count(`SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED')`) > 0; i++ {
		h.drain()
		h.clk.Advance(time.Minute)
	}
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED')`))
	require.Greater(t, h.e.batched, 600, "the executor ran batches (all but the one the failing message rolled back)")
	open(h, history+1000)

	heads, next := h.headLookupBuffers()
	t.Logf("head lookup buffers: loadHeads %d (fresh table %d), markNext %d (fresh table %d)", heads, freshHeads, next, freshNext)
	require.LessOrEqual(t, heads, 2*freshHeads+8, "loadHeads reads the finished history")
	require.LessOrEqual(t, next, 2*freshNext+8, "markNext reads the finished history")

	// The same lookups from floor 0 (a new term's first) walk the history.
	walk := h.explainBuffers(headsSQL, h.e.batchSize(), int64(0), int64(0), headsRawBudget)
	require.Greater(t, walk, 10*heads+50, "the dead entries are what the floor skips")

	// And they find exactly what the engine's do.
	floor, _ := h.e.floor.read()
	require.LessOrEqual(t, floor, int64(history+1000))
	progressed, _ := h.step()
	require.True(t, progressed)
	require.Equal(t, StateSkipped, h.state(history+1000), "the head above the floor ran")
}

// TestHead_R_B1_FloorFollowsLowerRegistrationsAndReplays: the floor never
// hides an open message. A message registered with a lower mailbox ID than
// the head's, after the executor moved past it, is the next head (strict
// FIFO); a replayed message below the floor is executed; a raise computed
// before a lowering is dropped.
func TestHead_R_B1_FloorFollowsLowerRegistrationsAndReplays(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.Batch = DefaultBatch })
	h.registerMany(100, 5, func(id int64) string { return refMsg(id, "GLST", "ADD", glst(fmt.Sprint("G", id), "x")) })
	h.drain()
	floor, _ := h.e.floor.read()
	require.Equal(t, int64(105), floor, "the floor moved past the finished run")

	h.insert(50, refMsg(50, "GLST", "ADD", glst("G50", "late")))
	h.insert(200, refMsg(200, "GLST", "ADD", glst("G200", "after")))
	floor, _ = h.e.floor.read()
	require.Equal(t, int64(50), floor, "a lower registration lowers the floor")
	heads, _, err := h.e.loadHeads(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, int64(50), heads[0].MsgID, "the lower ID is the head")
	h.drain()
	require.Equal(t, StateSucceeded, h.state(50))
	require.Equal(t, StateSucceeded, h.state(200))

	// A replay below the floor.
	h.insert(300, infraRaw)
	for i := 0; i < 10 && h.state(300) != StateDead; i++ {
		h.drain()
		h.clk.Advance(time.Minute)
	}
	require.Equal(t, StateDead, h.state(300))
	h.insert(400, refMsg(400, "GLST", "ADD", glst("G400", "x")))
	h.drain()
	floor, _ = h.e.floor.read()
	require.Equal(t, int64(401), floor)
	h.exec(`UPDATE proc_state SET raw = $1 WHERE msg_id = 300`, refMsg(300, "GLST", "ADD", glst("G300", "replayed")))
	h.exec(`INSERT INTO replay_request (msg_ids, selector, operator, reason, requested_at) VALUES ($1, '{}', 'op', 'fixed', $2)`, []int64{300}, t0)
	h.drain()
	require.Equal(t, StateSucceeded, h.state(300), "the replayed message ran")

	// The compare-and-set: a raise computed before a lowering is dropped.
	var f headFloor
	_, gen := f.read()
	f.lower(7)
	f.raise(1000, gen)
	got, gen := f.read()
	require.Zero(t, got, "a stale raise would hide the lowered message")
	f.raise(7, gen)
	got, _ = f.read()
	require.Equal(t, int64(7), got)
	// A lowering above the new floor (new messages registered) keeps it
	// reachable: the raise stands.
	_, gen = f.read()
	f.lower(2000)
	f.raise(1000, gen)
	got, _ = f.read()
	require.Equal(t, int64(1000), got, "a registration above does not drop the raise")
}

// TestHead_R_B1_LowerRegistrationBetweenBatchesIsTheNextHead: a message
// registered with a lower mailbox ID than the batch that just ran (a late
// arrival: its mailbox row committed after higher ones) is the next
// step's head, although that batch read the next heads, from above
// itself, behind its COMMIT (prefetchHeads). Taking those heads kept the
// late message waiting behind every later batch for as long as the load
// lasted: at 500 messages a second, 24 s to 220 s, while messages
// registered after it were applied before it.
func TestHead_R_B1_LowerRegistrationBetweenBatchesIsTheNextHead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.Batch = 4 })
	h.registerMany(100, 12, func(id int64) string { return refMsg(id, "GLST", "ADD", glst(fmt.Sprint("G", id), "x")) })
	progressed, _ := h.step()
	require.True(t, progressed)
	require.Equal(t, StateSucceeded, h.state(103), "the first batch ran")
	require.Equal(t, StatePending, h.state(104))

	h.insert(50, refMsg(50, "GLST", "ADD", glst("G50", "late")))
	progressed, _ = h.step()
	require.True(t, progressed)
	require.Equal(t, StateSucceeded, h.state(50), "the late message is the next head")

	// A lowering the prefetch's own read could not see: between the
	// batch's heads and its COMMIT.
	var f headFloor
	f.lower(200)
	_, gen := f.read()
	require.False(t, f.loweredBelow(300, gen), "nothing lowered since")
	f.lower(250)
	require.True(t, f.loweredBelow(300, gen), "250 lowered below 300 since gen")
	require.False(t, f.loweredBelow(250, gen), "nothing below 250")
	for range 2 * len(f.recent) {
		f.lower(1000)
	}
	require.True(t, f.loweredBelow(2000, gen), "too many lowerings to tell: assume one below")
}
