package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReference_R_C10_DNLDReplacesTheWholeType: DNLD (and RESP) upserts every
// record and deletes the stored records of that type it does not carry;
// other types are untouched.
//
// Validation 001§6 INV-17b "同事务提交、晚于 Redis、日计划分批".
// Validation 001§6 INV-26/INV-27 "参考数据覆盖、全量替换、空标签、逐类门控".
//
// Also names G-REF-DATA, US-03, US-13, C-31, INV-26, INV-27.
func TestReference_R_C10_DNLDReplacesTheWholeType(t *testing.T) {
	t.Parallel()
	for _, styp := range []string{"DNLD", "RESP"} {
		t.Run(styp, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.run(1, refMsg(1, "GLST", "ADD", glst("A", "a"), glst("B", "b")))
			h.run(2, refMsg(2, "ABDG", "ADD", "<ABDG><ABCD>X</ABCD><STND>1</STND><STND>2</STND></ABDG>"))
			h.run(3, refMsg(3, "GLST", styp, glst("B", "b2"), glst("C", "c")))
			r := h.proc(3)
			require.Equal(t, StateSucceeded, r.State, r.Reason)
			require.Equal(t, "GLST "+styp+": 2 records", r.Reason)
			require.Equal(t, []string{"B", "C"}, h.refKeys("GLST"))
			require.Equal(t, glstDoc("B", "b2"), h.ref("GLST", "B"))
			require.Equal(t, []string{"X"}, h.refKeys("ABDG"))
			require.Equal(t, map[string]any{"ABCD": "X", "STND": []any{"1", "2"}}, h.ref("ABDG", "X"))
			require.Zero(t, h.count(`SELECT count(*) FROM outbox WHERE target <> 'mailbox'`), "reference data emits no flight events")

			// An explicitly empty snapshot (RECS 0) empties the type.
			h.run(4, refMsg(4, "GLST", styp))
			require.Equal(t, StateSucceeded, h.state(4))
			require.Empty(t, h.refKeys("GLST"))
			require.Equal(t, []string{"X"}, h.refKeys("ABDG"))
		})
	}
}

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

// TestReference_R_C10_InvalidRecordLeavesTheTypeUntouched: a record without
// its key (or a key twice) is DEAD(PROTOCOL) and none of the message's
// records is written; other messages proceed.
//
// Validation 001§6 INV-26/INV-27 "参考数据覆盖、全量替换、空标签、逐类门控".
func TestReference_R_C10_InvalidRecordLeavesTheTypeUntouched(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		raw  string
		why  string
	}{
		{"DNLDRecordWithoutKey", refMsg(2, "GLST", "DNLD", glst("C", "c"), "<GLST><GTNM>no key</GTNM></GLST>"), "without key GCOD"},
		{"ADDRecordWithEmptyKey", refMsg(2, "GLST", "ADD", glst("C", "c"), glst("", "empty")), "without key GCOD"},
		{"DELRecordWithoutKey", refMsg(2, "GLST", "DEL", "<GLST><GCOD>A</GCOD></GLST>", "<GLST/>"), "without key GCOD"},
		{"KeyTwice", refMsg(2, "GLST", "UPD", glst("C", "c"), glst("C", "d")), "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.run(1, refMsg(1, "GLST", "ADD", glst("A", "a"), glst("B", "b")))
			before := h.snapshotTables()
			h.run(2, tc.raw)
			r := h.proc(2)
			require.Equal(t, StateDead, r.State, r.Reason)
			require.Equal(t, ClassProtocol, r.ErrorClass)
			require.Contains(t, r.Reason, tc.why)
			require.Equal(t, before, h.snapshotTables())
			require.Equal(t, 1, h.mailboxRows(2))
			h.run(3, refMsg(3, "ABDG", "ADD", "<ABDG><ABCD>X</ABCD></ABDG>"))
			require.Equal(t, StateSucceeded, h.state(3))
		})
	}
}

// TestReference_R_C10_EveryCatalogueTypeHasAKey: each of the 23 reference
// types is stored by its key element (catalogue §6).
func TestReference_R_C10_EveryCatalogueTypeHasAKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.IgnoreTypes = map[string]bool{} })
	keys := map[string]string{
		"ABDG": "ABCD", "ABNR": "ANRC", "AIRC": "ITAT", "AIRL": "ITOP", "ARPT": "ITCD",
		"BLST": "BCOD", "CHLT": "CCOD", "CITY": "ITCD", "CLST": "CCOD", "COUL": "COUC",
		"DLYL": "DCOD", "FLTL": "FTYP", "GLST": "GCOD", "HLTR": "HLTC", "ORGN": "OGID",
		"PLST": "PCOD", "REGL": "REGC", "REGN": "RNUM", "SLST": "SCOD", "STTS": "STTC",
		"TLST": "TCOD", "VIPL": "VPCD", "VIPS": "VSCD",
	}
	require.Equal(t, keys, refKeys)
	id := int64(0)
	for typ, key := range keys {
		id++
		h.run(id, refMsg(id, typ, "ADD", "<"+typ+"><"+key+">K"+typ+"</"+key+"><X>1</X></"+typ+">"))
		require.Equal(t, StateSucceeded, h.state(id), "%s: %s", typ, h.proc(id).Reason)
		require.Equal(t, []string{"K" + typ}, h.refKeys(typ))
	}
}
