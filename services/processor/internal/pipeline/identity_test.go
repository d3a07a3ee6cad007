package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIdentity_R_B4_SecondMessageWithSameIdentityIsSkipped: the identity
// SNDR|TYPE|STYP|SEQN is bound to the first message; a later message with
// the same identity is SKIPPED "duplicate-of:<id>" with its backfill intent
// and changes nothing.
//
// Validation 001§6 INV-8 "非业务型终态"; 002§8 "非业务型终态".
// Validation 001§6 INV-9 "同身份多条记录、失败后重试、清理后重复"; 002§8 "同身份多条记录、失败后重试、归档后重复".
//
// Also names C-4, C-20, C-22.
func TestIdentity_R_B4_SecondMessageWithSameIdentityIsSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, refMsg(100, "GLST", "ADD", glst("G1", "first")))
	h.run(2, refMsg(100, "GLST", "ADD", glst("G1", "second")))
	h.run(3, refMsg(101, "GLST", "ADD", glst("G2", "other seqn")))

	require.Equal(t, "AODB|GLST|ADD|100", h.proc(1).IdentityKey)
	r := h.proc(2)
	require.Equal(t, StateSkipped, r.State)
	require.Equal(t, "duplicate-of:1", r.Reason)
	require.Empty(t, r.ErrorClass)
	require.Empty(t, r.IdentityKey, "the duplicate does not take the identity")
	require.Equal(t, "GLST", r.Type, "META is recorded with the terminal state")
	require.Equal(t, "100", r.Seqn)
	require.Equal(t, 1, h.mailboxRows(2))
	require.Equal(t, "first", h.ref("GLST", "G1")["GTNM"], "the duplicate changed nothing")
	require.Equal(t, StateSucceeded, h.state(3))

	// A duplicate of a flight message bumps no version and emits nothing.
	h.run(4, schd(200, "DNLD", fltr(15, day23)))
	before := h.snapshotTables()
	h.run(5, schd(200, "DNLD", fltr(15, day23, "<RENO>B1</RENO>")))
	require.Equal(t, "duplicate-of:4", h.proc(5).Reason)
	require.Equal(t, before, h.snapshotTables())
}

// TestIdentity_R_B4_RetryIsNotItsOwnDuplicate: a message retried after a
// failure finds at most its own binding and is executed, never SKIPPED.
//
// Validation 001§6 INV-9 "同身份多条记录、失败后重试、清理后重复"; 002§8 "同身份多条记录、失败后重试、归档后重复".
func TestIdentity_R_B4_RetryIsNotItsOwnDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)

	// Natural path: the first attempt fails inside its transaction.
	h.exec(`ALTER TABLE ref_data RENAME TO ref_data_away`)
	h.insert(1, refMsg(100, "GLST", "ADD", glst("G1", "a")))
	h.step()
	require.Equal(t, StateFailed, h.state(1))
	h.exec(`ALTER TABLE ref_data_away RENAME TO ref_data`)
	h.clk.Advance(time.Second)
	h.drain()
	r := h.proc(1)
	require.Equal(t, StateSucceeded, r.State, r.Reason)
	require.Equal(t, "AODB|GLST|ADD|100", r.IdentityKey)

	// A binding left by an earlier attempt (as an interrupted attempt of an
	// older release could leave it) is the message's own.
	h.insert(2, refMsg(101, "GLST", "ADD", glst("G2", "b")))
	h.exec(`UPDATE proc_state SET identity_key='AODB|GLST|ADD|101', state='FAILED', attempts=1, next_attempt_at=$1 WHERE msg_id=2`, t0)
	h.drain()
	r = h.proc(2)
	require.Equal(t, StateSucceeded, r.State, r.Reason)
	require.Equal(t, "AODB|GLST|ADD|101", r.IdentityKey)
	require.Equal(t, "b", h.ref("GLST", "G2")["GTNM"])
}

// TestIdentity_R_B4_DayBoundaryOption: with identity.include-day-boundary
// the DTTM day is part of the identity, so a sender restarting SEQN daily
// is not deduplicated across days; the default ignores DTTM.
func TestIdentity_R_B4_DayBoundaryOption(t *testing.T) {
	t.Parallel()
	msg := func(dttm, name string) string {
		return strings.Replace(refMsg(100, "GLST", "ADD", glst("G1", name)), "20210123053000", dttm, 1)
	}
	for _, tc := range []struct {
		name     string
		boundary bool
		second   string
		key      string
	}{
		{"Default", false, StateSkipped, "AODB|GLST|ADD|100"},
		{"IncludeDayBoundary", true, StateSucceeded, "AODB|GLST|ADD|100|20210123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.IncludeDayBoundary = tc.boundary })
			h.run(1, msg("20210123235959", "a"))
			h.run(2, msg("20210124000001", "b"))
			require.Equal(t, tc.key, h.proc(1).IdentityKey)
			require.Equal(t, tc.second, h.state(2))
		})
	}
}

// TestBindIdentity_R_B4_BindsOnceInTheMessageTransaction exercises
// bindIdentity directly: the first caller binds, the same message rebinds
// harmlessly, another message learns the holder.
//
// Validation 001§6 INV-9 "同身份多条记录、失败后重试、清理后重复"; 002§8 "同身份多条记录、失败后重试、归档后重复".
func TestBindIdentity_R_B4_BindsOnceInTheMessageTransaction(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.insert(1, "x")
	h.insert(2, "y")
	bind := func(id int64) int64 {
		tx, err := h.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		dup, err := h.e.bindIdentity(ctx, tx, id, "K")
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return dup
	}
	require.Zero(t, bind(1))
	require.Zero(t, bind(1), "own binding is no duplicate")
	require.Equal(t, int64(1), bind(2))
	require.Empty(t, h.proc(2).IdentityKey)
	require.Equal(t, "K", h.proc(1).IdentityKey)
	// Rolled back, a binding leaves nothing behind.
	tx, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = h.e.bindIdentity(ctx, tx, 2, "L")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.Empty(t, h.proc(2).IdentityKey)
}

// TestIdentity_R_K3_ForgedMessageReservesNothing: a forged message with the
// genuine message's identity and an unknown FLID arrives first and ends
// SKIPPED (no such flight); a rejected one (DEAD PROTOCOL) likewise. Neither
// keeps the identity, so the genuine message that arrives later is applied
// and the flight updated, not SKIPPED duplicate-of. The one message path
// and batches alike.
func TestIdentity_R_K3_ForgedMessageReservesNothing(t *testing.T) {
	t.Parallel()
	for name, batch := range map[string]int{"OneMessage": 0, "Batched": DefaultBatch} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.Batch = batch })
			h.run(1, schd(1, "DNLD", fltr(15, day23)))
			// Both forged messages and the genuine one in one stream, so that
			// with batches they are decided in one transaction.
			h.insert(2, flopMsg(700, "STND", flopRec(999999, "<STND>X1</STND>")))                   // unknown FLID: SKIPPED
			h.insert(3, flopMsg(701, "FDIV", flopRec(15, `<FDIV DDES="HKG" DDIR="TOO">WX</FDIV>`))) // rejected: DEAD(PROTOCOL)
			h.insert(4, flopMsg(700, "STND", flopRec(15, "<STND>S1</STND>")))                       // genuine 700
			h.insert(5, flopMsg(701, "FDIV", flopRec(15, `<FDIV DDES="HKG" DDIR="TO">WX</FDIV>`)))  // genuine 701
			h.drain()

			forged, rejected := h.proc(2), h.proc(3)
			require.Equal(t, StateSkipped, forged.State, forged.Reason)
			require.Equal(t, StateDead, rejected.State, rejected.Reason)
			require.Equal(t, ClassProtocol, rejected.ErrorClass)
			require.Empty(t, forged.IdentityKey, "a SKIPPED message reserves no identity")
			require.Empty(t, rejected.IdentityKey, "a DEAD message reserves no identity")
			for _, id := range []int64{4, 5} {
				r := h.proc(id)
				require.Equal(t, StateApplied, r.State, "message %d: %s", id, r.Reason)
				require.NotContains(t, r.Reason, "duplicate-of")
				require.NotEmpty(t, r.IdentityKey, "the applied message holds its identity")
			}
			f := h.flight(15)
			require.Equal(t, "S1", f.Doc["STND"], "the genuine message updated the flight")
			require.Equal(t, int64(5), f.LastMsgID)

			// The identity is held from now on: a repeat is a duplicate.
			h.run(6, flopMsg(700, "STND", flopRec(15, "<STND>S2</STND>")))
			require.Equal(t, "duplicate-of:4", h.proc(6).Reason)
		})
	}
}
