package relay

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFloors_R_J5_LateCommitIsNeverPassed: a row whose transaction commits
// after a drain passed its ID is announced with a lower bound of its ID;
// the next drain starts below it, even when the announcement arrived while
// the drain that passed it was still running.
func TestFloors_R_J5_LateCommitIsNeverPassed(t *testing.T) {
	var f floors
	at, tok := f.start(TargetMsg)
	require.Zero(t, at, "no listener: from the start")
	f.advance(TargetMsg, tok, 100)
	at, _ = f.start(TargetMsg)
	require.Zero(t, at, "without a listener the floor never moves")

	f.listening(true)
	at, tok = f.start(TargetMsg)
	require.Zero(t, at)
	f.advance(TargetMsg, tok, 100)
	at, tok = f.start(TargetMsg)
	require.EqualValues(t, 100, at, "rows up to 100 delivered")

	f.lower(40) // a transaction that used IDs above 40 committed during this drain
	f.advance(TargetMsg, tok, 200)
	at, tok = f.start(TargetMsg)
	require.EqualValues(t, 40, at, "the late rows are scanned")
	f.advance(TargetMsg, tok, 200)
	require.EqualValues(t, 200, f.peek(TargetMsg))

	f.listening(false)
	require.Zero(t, f.peek(TargetMsg), "nothing is announced while the listener is away")
	f.listening(true)
	at, _ = f.start(TargetMsg)
	require.Zero(t, at, "a reconnected listener scans from the start once")

	f.lowerTarget(TargetMailbox, 0)
	at, _ = f.start(TargetMailbox)
	require.Zero(t, at)
}
