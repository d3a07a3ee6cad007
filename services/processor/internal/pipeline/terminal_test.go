package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/pgxutil"
)

// TestTerminal_R_B6_INV8_OneMailboxRowWithEveryTerminalState: SUCCEEDED,
// SKIPPED and DEAD each carry exactly one outbox row target='mailbox'
// (written with the state); PENDING, FAILED and APPLIED carry none.
//
// Validation 001§6 INV-1 "五事实互不替代".
// Validation 001§6 INV-8 "PG 提交失败、回填失败"; 002§8 "PG 提交失败、信箱回填失败".
// Validation 001§6 INV-8 "非业务型终态"; 002§8 "非业务型终态".
func TestTerminal_R_B6_INV8_OneMailboxRowWithEveryTerminalState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "a")))                                // SUCCEEDED
	h.insert(2, envelope(2, "EROR", "NONE", "<EROR>x</EROR>"))                            // SKIPPED (ignored)
	h.insert(3, refMsg(1, "GLST", "ADD", glst("G1", "b")))                                // SKIPPED (duplicate)
	h.insert(4, "")                                                                       // DEAD(MALFORMED)
	h.insert(5, schd(5, "DNLD", fltr(15, day23)))                                         // APPLIED
	h.insert(6, flopMsg(6, "FDIV", flopRec(15, `<FDIV DDES="HKG" DDIR="TOO">WX</FDIV>`))) // DEAD(PROTOCOL)
	h.insert(7, flopMsg(7, "STND", flopRec(99, "<STND>S1</STND>")))                       // SKIPPED (no flight)
	h.insert(8, infraRaw)                                                                 // FAILED
	h.insert(9, refMsg(9, "GLST", "ADD", glst("G2", "c")))                                // PENDING behind it
	h.drain()

	want := map[int64]string{
		1: StateSucceeded, 2: StateSkipped, 3: StateSkipped, 4: StateDead, 5: StateApplied,
		6: StateDead, 7: StateSkipped, 8: StateFailed, 9: StatePending,
	}
	terminal := map[string]bool{StateSucceeded: true, StateSkipped: true, StateDead: true}
	for id, state := range want {
		r := h.proc(id)
		require.Equal(t, state, r.State, "message %d: %s", id, r.Reason)
		if terminal[state] {
			require.Equal(t, 1, h.mailboxRows(id), "message %d (%s)", id, state)
			require.NotNil(t, r.FinishedAt, "message %d", id)
		} else {
			require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox' AND msg_id=$1`, id), "message %d (%s)", id, state)
			require.Nil(t, r.FinishedAt, "message %d", id)
		}
	}
	require.Equal(t, 6, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox'`))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox' AND (payload IS NOT NULL OR state <> 'PENDING')`))

	// The APPLIED message gets its marker only with SUCCEEDED.
	h.ack(Ack{FLID: 15, Version: 1})
	require.Equal(t, StateSucceeded, h.state(5))
	require.Equal(t, 1, h.mailboxRows(5))
	require.Equal(t, 7, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox'`))
}

// TestTerminal_R_B6_INV6_TerminalStatesAreFinal: no transition touches a
// terminal message again: finishIn, markApplied and recordFailure report
// ErrNotOpen (or do nothing) and the row and its single marker stay as they
// were.
//
// Validation 001§6 INV-6 "投递失败后终态不变".
func TestTerminal_R_B6_INV6_TerminalStatesAreFinal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.run(1, refMsg(1, "GLST", "ADD", glst("G1", "a"))) // SUCCEEDED
	h.run(2, envelope(2, "EROR", "NONE", "<EROR/>"))    // SKIPPED
	h.run(3, "")                                        // DEAD
	h.run(4, schd(4, "DNLD", fltr(15, day23)))          // APPLIED → SUCCEEDED
	h.ack(Ack{FLID: 15, Version: 1})

	for _, id := range []int64{1, 2, 3, 4} {
		before := h.proc(id)
		for _, state := range []string{StateDead, StateSkipped, StateSucceeded} {
			err := h.e.finishIn(ctx, h.pool, id, &metaCols{SNDR: "X", TYPE: "Y"}, state, ClassExhausted, "again")
			require.ErrorIs(t, err, ErrNotOpen, "message %d → %s", id, state)
		}
		err := pgxutil.InTx(ctx, h.pool, func(tx pgx.Tx) error {
			return h.e.markApplied(ctx, tx, id, &metaCols{}, "again")
		})
		require.ErrorIs(t, err, ErrNotOpen, "message %d → APPLIED", id)
		// A late failure report (last allowed attempt or not) changes nothing.
		for _, attempts := range []int{0, h.e.opt.MaxAttempts - 1} {
			err = h.e.recordFailure(ctx, &head{MsgID: id, Attempts: attempts}, ClassInfra, "late")
			if err != nil {
				require.ErrorIs(t, err, ErrNotOpen)
			}
		}
		require.Equal(t, before, h.proc(id), "message %d changed", id)
		require.Equal(t, 1, h.mailboxRows(id))
	}
	// Acks again: no second marker.
	h.ack(Ack{FLID: 15, Version: 1}, Ack{FLID: 15, Version: 9})
	require.Equal(t, 1, h.mailboxRows(4))
}

// TestTerminal_R_B6_FinishInMovesOpenStates: finishIn accepts PENDING, FAILED
// and APPLIED, writes the state, META and reason and exactly one marker.
func TestTerminal_R_B6_FinishInMovesOpenStates(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.insert(1, "a")
	h.insert(2, "b")
	h.insert(3, "c")
	h.exec(`UPDATE proc_state SET state='FAILED', error_class='INFRA', attempts=2, next_attempt_at=now() WHERE msg_id=2`)
	h.exec(`UPDATE proc_state SET state='APPLIED' WHERE msg_id=3`)
	for _, id := range []int64{1, 2, 3} {
		require.NoError(t, h.e.finishIn(ctx, h.pool, id, &metaCols{SNDR: "AODB", TYPE: "GLST", STYP: "ADD", SEQN: "9"}, StateDead, ClassProtocol, "why"))
		r := h.proc(id)
		require.Equal(t, StateDead, r.State)
		require.Equal(t, ClassProtocol, r.ErrorClass)
		require.Equal(t, "why", r.Reason)
		require.Equal(t, "GLST", r.Type)
		require.Nil(t, r.NextAttemptAt)
		require.True(t, r.FinishedAt.Equal(t0))
		require.Equal(t, 1, h.mailboxRows(id))
	}
	err := h.e.finishIn(ctx, h.pool, 42, nil, StateDead, ClassProtocol, "unknown message")
	require.True(t, errors.Is(err, ErrNotOpen))
	require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE msg_id=42`))
}

// TestIgnore_R_B9_IgnoredTypesAreSkippedWithReason: the ignore list (default
// LDM, REGN, RSTA, EROR) makes a message SKIPPED with its reason and its
// backfill intent, whatever its layout; unknown types are not ignored.
//
// Validation 001§6 INV-8 "非业务型终态"; 002§8 "非业务型终态".
//
// Also names US-04.
func TestIgnore_R_B9_IgnoredTypesAreSkippedWithReason(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, envelope(1, "EROR", "NONE", "<EROR><CODE>1</CODE></EROR>"))
	h.run(2, envelope(2, "LDM", "ADD", "<LDM>free text</LDM>"))
	h.run(3, refMsg(3, "REGN", "ADD", "<REGN><RNUM>B1234</RNUM></REGN>"))
	h.run(4, envelope(4, "ldm", "add", ""))
	for id, typ := range map[int64]string{1: "EROR", 2: "LDM", 3: "REGN", 4: "LDM"} {
		r := h.proc(id)
		require.Equal(t, StateSkipped, r.State, "message %d", id)
		require.Equal(t, "ignored type "+typ+" (pipeline.ignore-types)", r.Reason)
		require.Equal(t, typ, r.Type)
		require.Empty(t, r.IdentityKey, "an ignored message binds no identity")
		require.Equal(t, 1, h.mailboxRows(id))
	}
	require.Empty(t, h.refKeys("REGN"))

	// With an empty ignore list REGN is ordinary reference data and EROR,
	// not in the catalogue, is parked DEAD(UNSUPPORTED) with its intent.
	h2 := newHarness(t, func(o *Options) { o.IgnoreTypes = map[string]bool{} })
	h2.run(1, refMsg(3, "REGN", "ADD", "<REGN><RNUM>B1234</RNUM></REGN>"))
	require.Equal(t, StateSucceeded, h2.state(1))
	require.Equal(t, []string{"B1234"}, h2.refKeys("REGN"))
	h2.run(2, envelope(1, "EROR", "NONE", "<EROR/>"))
	r := h2.proc(2)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassUnsupported, r.ErrorClass)
	require.Equal(t, 1, h2.mailboxRows(2))
}
