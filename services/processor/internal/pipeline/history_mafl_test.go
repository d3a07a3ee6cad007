package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// codeShareSweepFixture is a master 201 of a day that stays live (the
// 24th) with two ACTIVE code-share children 101 and 102 of a day the sweep
// purges (the 23rd), and the clock at the sweep's run time.
func codeShareSweepFixture(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, maintenanceOptions)
	h.run(1, schd(1, "DNLD", fltr(201, day24)))
	h.run(2, schd(2, "DNLD", fltr(101, day23, "<MAID>201</MAID>"), fltr(102, day23, "<MAID>201</MAID>")))
	require.Equal(t, []any{
		map[string]any{"FLID": "101", "FLNO": "YG9101"},
		map[string]any{"FLID": "102", "FLNO": "YG9102"},
	}, h.flight(201).Doc["MAFL"])
	h.clk.Set(airport(t, 2021, 1, 27, 3, 30))
	return h
}

// TestHistory_R_C8_INV22_PurgedActiveChildRewritesItsMaster: purging an
// ACTIVE code-share child rewrites its live master in the same
// transaction (R-C8, INV-22): each purge stores the master's next version
// without the child in its MAFL, keeps the message that last wrote it,
// and writes its three records with no message; a second run changes
// nothing. What the rewrite's records carry is decide's
// TestSweep_R_C8_INV22_PurgedChildRewritesItsMaster.
func TestHistory_R_C8_INV22_PurgedActiveChildRewritesItsMaster(t *testing.T) {
	t.Parallel()
	h := codeShareSweepFixture(t)
	master := h.flight(201)

	res := h.historySweep()
	require.Equal(t, 2, res.Archived)
	require.Equal(t, 2, res.Tombstones)
	require.Equal(t, []int64{201}, h.flightRows())

	f := h.flight(201)
	require.Equal(t, "ACTIVE", f.State)
	require.Equal(t, master.Version+2, f.Version, "one version per child that left")
	require.NotContains(t, f.Doc, "MAFL", "no purged flight stays in the MAFL")
	require.Equal(t, master.LastMsgID, f.LastMsgID, "no message changed the master")

	rows := h.outbox(`pkey='201' AND msg_id IS NULL`)
	require.Len(t, rows, 6, "flight-state, msg and schd per rewrite")
	for _, r := range rows {
		require.NotNil(t, r.Payload, "an update, not a tombstone (%s)", r.Target)
	}

	before := h.count(`SELECT count(*) FROM outbox`)
	require.Equal(t, HistoryResult{Cutoff: res.Cutoff}, h.historySweep())
	require.Equal(t, before, h.count(`SELECT count(*) FROM outbox`), "a second run changes nothing")
}

// TestHistory_R_C8_INV22_MasterRewriteFailureKeepsTheChild: the master's
// rewrite is part of the child's purge: when it fails, the child's
// archiving, tombstone and removal roll back with it, the child stays live
// and the next run purges it.
func TestHistory_R_C8_INV22_MasterRewriteFailureKeepsTheChild(t *testing.T) {
	t.Parallel()
	h := codeShareSweepFixture(t)
	h.exec(`CREATE FUNCTION refuse_201() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'master 201 refused'; END $$`)
	h.exec(`CREATE TRIGGER refuse_201 BEFORE UPDATE ON flight FOR EACH ROW WHEN (OLD.flid = 201) EXECUTE FUNCTION refuse_201()`)
	master := h.flight(201)

	res := h.historySweep()
	require.Equal(t, 2, res.Failed)
	require.Zero(t, res.Archived)
	require.Equal(t, []int64{101, 102, 201}, h.flightRows())
	require.Zero(t, h.count(`SELECT count(*) FROM flight_history`))
	require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE msg_id IS NULL`), "no tombstone of a child that stayed")
	require.Equal(t, master, h.flight(201))

	h.exec(`DROP TRIGGER refuse_201 ON flight`)
	res = h.historySweep()
	require.Equal(t, 2, res.Archived)
	require.Equal(t, []int64{201}, h.flightRows())
	require.NotContains(t, h.flight(201).Doc, "MAFL")
}

// TestHistory_R_C8_INV18_LockedMasterDefersTheChild: a child whose master
// a processing transaction holds is skipped like a locked flight (INV-18),
// without waiting, and purged with its master's rewrite by the next run.
func TestHistory_R_C8_INV18_LockedMasterDefersTheChild(t *testing.T) {
	t.Parallel()
	h := codeShareSweepFixture(t)
	ctx := context.Background()
	tx, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	w := newTxWriter(ctx, tx, 0, Source{}, time.Time{}, nil)
	cur, err := w.Load(ctx, 201) // the row lock a message's transaction takes
	require.NoError(t, err)
	require.NotNil(t, cur)

	res := h.historySweep()
	require.Equal(t, 2, res.Skipped)
	require.Zero(t, res.Archived)
	require.Equal(t, []int64{101, 102, 201}, h.flightRows())
	require.NoError(t, tx.Rollback(ctx))

	res = h.historySweep()
	require.Equal(t, 2, res.Archived)
	require.NotContains(t, h.flight(201).Doc, "MAFL")
}
