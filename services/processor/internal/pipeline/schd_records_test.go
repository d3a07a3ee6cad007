package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIdempotency_INV20b_SchdAddUpdDelTwice: SCHD ADD, UPD and DEL run
// again — the same message re-opened with its identity, or a copy under a
// new SEQN — change nothing: the upsert finds equal documents, the flights
// to delete are already deleted (SKIPPED with the reason, like FDEL).
func TestIdempotency_INV20b_SchdAddUpdDelTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23, "<MAID>15</MAID>")))
	h.ackAll()
	msgs := []struct {
		styp, raw, again string
	}{
		{"ADD", schd(2, "ADD", fltr(17, day23, "<MAID>15</MAID>")), StateSucceeded},
		{"UPD", schd(3, "UPD", fltr(16, day23, "<MAID>15</MAID><TRML>T1</TRML>")), StateSucceeded},
		{"DEL", schd(4, "DEL", "<FLTR><FLID>15</FLID></FLTR>"), StateSkipped},
	}
	id := int64(1)
	for _, m := range msgs {
		id++
		first := id
		h.run(first, m.raw)
		h.ackAll()
		require.Equal(t, StateSucceeded, h.state(first), "%s: %s", m.styp, h.proc(first).Reason)
		after := h.businessTables()

		h.replay(first)
		h.drain()
		h.ackAll()
		require.Equal(t, m.again, h.state(first), "%s replayed: %s", m.styp, h.proc(first).Reason)
		require.Equal(t, after, h.businessTables(), "%s replayed changes nothing", m.styp)

		id++
		h.run(id, seqnPattern.ReplaceAllString(m.raw, "<SEQN>9$1</SEQN>"))
		h.ackAll()
		require.Equal(t, m.again, h.state(id), "%s copy: %s", m.styp, h.proc(id).Reason)
		require.Equal(t, after, h.businessTables(), "%s copy changes nothing", m.styp)
	}
}

// TestUnsupported_R_B9_ParkedAtFirstAttemptWithoutHoldingTheFIFO: a legal
// message without an implementation — a TYPE not in the catalogue, an
// inbound RQRD (our own request type, no inbound handler) — is parked
// DEAD(UNSUPPORTED) at its first attempt with its backfill intent (INV-8)
// and the reason naming it, so the messages behind it run at once, with
// no backoff (the fake clock never moves). Replayed, it runs again at
// once and, still unsupported, is parked again with a new intent.
func TestUnsupported_R_B9_ParkedAtFirstAttemptWithoutHoldingTheFIFO(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, envelope(1, "ZZZZ", "ADD", "<ZZZZ>1</ZZZZ>"))
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G1", "a")))
	h.insert(3, envelope(3, "RQRD", "GLST", "<RQRD><RTYP>GLST</RTYP></RQRD>"))
	h.insert(4, refMsg(4, "GLST", "ADD", glst("G2", "b")))
	require.Zero(t, h.drain(), "nothing waits for a backoff")
	require.True(t, h.clk.Now().Equal(t0))

	for id, want := range map[int64]string{1: `message type "ZZZZ" is not in the SIS catalogue`, 3: "no handler for RQRD/GLST"} {
		r := h.proc(id)
		require.Equal(t, StateDead, r.State, "message %d", id)
		require.Equal(t, ClassUnsupported, r.ErrorClass, "message %d", id)
		require.Contains(t, r.Reason, want)
		require.Contains(t, r.Reason, "parked DEAD(UNSUPPORTED) at its first attempt")
		require.Zero(t, r.Attempts, "message %d", id)
		require.NotNil(t, r.FinishedAt)
		require.Equal(t, 1, h.mailboxRows(id), "message %d carries its backfill intent", id)
	}
	require.Equal(t, "ZZZZ", h.proc(1).Type, "META is recorded, so a replay can select the type")
	require.Empty(t, h.proc(3).IdentityKey, "parked: it applied nothing, so it reserves no identity (R-K3)")
	require.Equal(t, StateSucceeded, h.state(2))
	require.Equal(t, StateSucceeded, h.state(4))

	req := h.requestReplay(1, 3)
	require.Zero(t, h.drain())
	require.Equal(t, "DONE", h.replayOutcome(req).State)
	for _, id := range []int64{1, 3} {
		r := h.proc(id)
		require.Equal(t, StateDead, r.State)
		require.Equal(t, ClassUnsupported, r.ErrorClass)
		require.Equal(t, 1, h.mailboxRows(id), "the earlier intent was withdrawn, the new outcome has its own")
	}
	require.Equal(t, 2, h.count(`SELECT count(*) FROM replay_audit WHERE previous_class='UNSUPPORTED'`))
}
