package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRegister_R_B3_UnstorableRecordIsMalformedAndDoesNotBlock: a record
// whose bytes PostgreSQL text cannot hold (NUL, invalid UTF-8) is registered
// DEAD(MALFORMED) with its backfill intent, and the valid records of the
// same batch are registered and processed (R-B2, R-B3, INV-8).
func TestRegister_R_B3_UnstorableRecordIsMalformedAndDoesNotBlock(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, "<MSG>\x00</MSG>")
	h.insert(2, "<MSG>\xff\xfe</MSG>")
	h.insert(3, flopMsg(3, "STND", flopRec(77, "<STND>S1</STND>")))
	h.drain()
	for _, id := range []int64{1, 2} {
		p := h.proc(id)
		require.Equal(t, "DEAD", p.State)
		require.Equal(t, 1, h.mailboxRows(id), "the backfill intent is written with the terminal state")
	}
	require.Equal(t, "SKIPPED", h.state(3), "later records are not blocked (flight 77 does not exist)")
}
