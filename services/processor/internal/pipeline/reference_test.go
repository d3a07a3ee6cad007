package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReference_R_C10_AddUpdUpsertDelDeletes: ADD and UPD upsert by key
// (either way round), DEL deletes by key (unknown keys are a no-op), and an
// empty element is stored as "no value".
//
// Validation 001§6 INV-26/INV-27 "参考数据覆盖、全量替换、空标签、逐类门控".
func TestReference_R_C10_AddUpdUpsertDelDeletes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, refMsg(1, "GLST", "ADD", glst("A", "a")))
	h.run(2, refMsg(2, "GLST", "UPD", glst("B", "b")))  // UPD of a missing key inserts
	h.run(3, refMsg(3, "GLST", "ADD", glst("A", "a2"))) // ADD of an existing key updates
	h.run(4, refMsg(4, "GLST", "UPD", "<GLST><GCOD>B</GCOD><GTNM></GTNM></GLST>"))
	require.Equal(t, []string{"A", "B"}, h.refKeys("GLST"))
	require.Equal(t, "a2", h.ref("GLST", "A")["GTNM"])
	require.Equal(t, map[string]any{"GCOD": "B", "GTNM": nil}, h.ref("GLST", "B"), "an empty element means no value: JSON null")
	var last int64
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT last_msg_id FROM ref_data WHERE type='GLST' AND key='A'`).Scan(&last))
	require.Equal(t, int64(3), last)

	// Writing the same document again keeps the row as it was.
	h.run(5, refMsg(5, "GLST", "UPD", glst("A", "a2")))
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT last_msg_id FROM ref_data WHERE type='GLST' AND key='A'`).Scan(&last))
	require.Equal(t, int64(3), last)

	h.run(6, refMsg(6, "GLST", "DEL", "<GLST><GCOD>A</GCOD></GLST>", "<GLST><GCOD>ZZ</GCOD></GLST>"))
	require.Equal(t, StateSucceeded, h.state(6))
	require.Equal(t, []string{"B"}, h.refKeys("GLST"))
}
