package sis

import (
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
	require.Equal(t, m.Root.Child(metaElement), slim.Root.Child(metaElement))
	require.Len(t, m.Body(), 1, "the original keeps its body")
	require.Equal(t, "1", m.Root.Child("SCHD").Child("RECS").Value())
}
