package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReference_R_C10_StoredByKeyWithTheMessageThatChangedIt: reference
// data end to end against PostgreSQL (the rules are decide's
// TestReference_R_C10_*): an upsert stores the document under its type
// and key with the message that wrote it, an empty element as JSON null;
// an equal document written again keeps the row as it was; DEL removes
// the key.
//
// Validation 001§6 INV-26/INV-27 "参考数据覆盖、全量替换、空标签、逐类门控".
func TestReference_R_C10_StoredByKeyWithTheMessageThatChangedIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	lastMsgID := func(key string) int64 {
		var last int64
		require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT last_msg_id FROM ref_data WHERE type='GLST' AND key=$1`, key).Scan(&last))
		return last
	}
	h.run(1, refMsg(1, "GLST", "ADD", glst("A", "a")))
	h.run(2, refMsg(2, "GLST", "UPD", "<GLST><GCOD>B</GCOD><GTNM></GTNM></GLST>"))
	h.run(3, refMsg(3, "GLST", "ADD", glst("A", "a2")))
	require.Equal(t, []string{"A", "B"}, h.refKeys("GLST"))
	require.Equal(t, glstDoc("A", "a2"), h.ref("GLST", "A"))
	require.Equal(t, map[string]any{"GCOD": "B", "GTNM": nil}, h.ref("GLST", "B"), "an empty element means no value: JSON null")
	require.Equal(t, int64(3), lastMsgID("A"))
	require.Equal(t, int64(2), lastMsgID("B"))

	// Writing the same document again keeps the row as it was.
	h.run(5, refMsg(5, "GLST", "UPD", glst("A", "a2")))
	require.Equal(t, StateSucceeded, h.state(5))
	require.Equal(t, int64(3), lastMsgID("A"))

	h.run(6, refMsg(6, "GLST", "DEL", "<GLST><GCOD>A</GCOD></GLST>", "<GLST><GCOD>ZZ</GCOD></GLST>"))
	require.Equal(t, StateSucceeded, h.state(6))
	require.Equal(t, []string{"B"}, h.refKeys("GLST"))
}
