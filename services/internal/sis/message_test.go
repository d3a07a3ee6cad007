package sis

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMessage_R_J4_WithoutBodyKeepsTheEnvelopeOnly: the copy keeps META
// (and Meta) and no body; the message copied from is left whole.
func TestMessage_R_J4_WithoutBodyKeepsTheEnvelopeOnly(t *testing.T) {
	t.Parallel()
	m, err := DecodeText(msg(metaWith("SCHD", "DNLD"), `<SCHD><RECS>1</RECS><FLTR><FLID>1</FLID></FLTR></SCHD>`))
	require.NoError(t, err)
	slim := m.WithoutBody()
	require.Equal(t, m.Meta, slim.Meta)
	require.Empty(t, slim.Body())
	require.NotNil(t, slim.Root.Child(metaElement))
	require.Equal(t, m.Root.Child(metaElement), slim.Root.Child(metaElement), "META as it was")
	require.NotSame(t, m.Root.Child(metaElement), slim.Root.Child(metaElement), "META copied, not shared")
	require.Len(t, m.Body(), 1, "the original keeps its body")
	require.Equal(t, "1", m.Root.Child("SCHD").Child("RECS").Value())
}

// TestMessage_R_J4_WithoutBodyLetsTheTreeGo: once the decoded message is
// dropped, its envelope keeps next to nothing of it. The decoder
// allocates nodes in chunks, so a META node shared with the tree kept its
// chunk, the chunks of that chunk's elements' children, and so on: the
// whole tree of a daily snapshot, held for all its steps (16 MB of a
// 20,000-flight package). Not parallel: it reads the heap's size.
func TestMessage_R_J4_WithoutBodyLetsTheTreeGo(t *testing.T) {
	var body strings.Builder
	body.WriteString("<SCHD><RECS>5000</RECS>")
	for f := range 5000 {
		fmt.Fprintf(&body, "<FLTR><FLID>%d</FLID><FFID>3U-3U%d-D-01DEC261015-D</FFID><ACFT>320</ACFT><STND>%d</STND><GATE>G%d</GATE></FLTR>", f+1, f, f%90, f%40)
	}
	body.WriteString("</SCHD>")
	raw := msg(metaWith("SCHD", "DNLD"), body.String())

	base := heapAfterGC()
	m, err := DecodeText(raw)
	require.NoError(t, err)
	tree := heapAfterGC() - base
	slim := m.WithoutBody()
	m = nil
	kept := heapAfterGC() - base
	require.Equal(t, "DNLD", slim.Meta.STYP)
	require.Greater(t, tree, int64(1<<20), "the tree of 5,000 flights takes megabytes")
	require.Less(t, kept, tree/20, "the envelope keeps %d bytes of a %d-byte tree", kept, tree)
	runtime.KeepAlive(slim)
	runtime.KeepAlive(raw)
}

// heapAfterGC is the live heap after a collection.
func heapAfterGC() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
