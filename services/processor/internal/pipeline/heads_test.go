package pipeline

import (
	"context"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestHead_R_J4_LargeMessagesAreNotReadAsABatch: the executor reads the
// FIFO's next messages only while the raw texts before each stay within
// headsRawBudget, so a backlog of large messages (daily snapshots up to the
// 10 MB limit) is read a few at a time, never a batch of 1,024 of them
// (gigabytes) to execute the first; small messages still come as a whole
// batch.
func TestHead_R_J4_LargeMessagesAreNotReadAsABatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const size = 3 << 20
	for id := int64(1); id <= 5; id++ {
		h.insert(id, envelope(id, "LDM", "ADD", "<LDM>"+strings.Repeat("x", size)+"</LDM>"))
	}
	for id := int64(6); id <= 105; id++ {
		h.insert(id, envelope(id, "LDM", "ADD", "<LDM/>"))
	}
	heads, _, err := h.e.loadHeads(context.Background(), 1024)
	require.NoError(t, err)
	var ids []int64
	for _, hd := range heads {
		ids = append(ids, hd.MsgID)
		require.Greater(t, len(hd.Raw), size, "msg_id %d read whole", hd.MsgID)
	}
	require.Equal(t, []int64{1, 2, 3}, ids, "3 MB each: the fourth starts past the 8 MB budget")

	h.exec(`UPDATE proc_state SET state = 'SKIPPED' WHERE msg_id <= 5`)
	h.e.floor.reset()
	heads, _, err = h.e.loadHeads(context.Background(), 1024)
	require.NoError(t, err)
	require.Len(t, heads, 100, "small messages come as a whole batch")
}

// TestSnapshot_R_K4_R_J4_KeptSnapshotIsNotReadAgainAtEachStep: between the
// steps of a daily snapshot the engine keeps its reading; its raw text is
// then not sent again with the FIFO head at each step (a 10 MB message in
// 100 steps was a gigabyte read and dropped), the head carrying the kept
// text itself.
func TestSnapshot_R_K4_R_J4_KeptSnapshotIsNotReadAgainAtEachStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.SnapshotBatch = 5 })
	h.insert(1, schd(1, "DNLD", fltrs(1000, 1019)...))
	progressed, _ := h.step()
	require.True(t, progressed)
	require.Equal(t, StatePending, h.state(1), "the package takes more steps")
	id, kept := h.e.snapshots.kept()
	require.Equal(t, int64(1), id, "its reading is kept")

	heads, _, err := h.e.loadHeads(context.Background(), 1024)
	require.NoError(t, err)
	require.Len(t, heads, 1)
	require.Equal(t, kept, heads[0].Raw)
	require.Same(t, unsafe.StringData(kept), unsafe.StringData(heads[0].Raw), "the head carries the kept text, not a copy read again")

	h.drain()
	require.Equal(t, StateApplied, h.state(1), h.proc(1).Reason)
	require.Equal(t, 20, h.count(`SELECT count(*) FROM flight WHERE state = 'ACTIVE'`))
}
