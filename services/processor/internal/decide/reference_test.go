package decide

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
			r := newRules(t)
			r.run(1, refMsg(1, "GLST", "ADD", glst("A", "a"), glst("B", "b")))
			r.run(2, refMsg(2, "ABDG", "ADD", "<ABDG><ABCD>X</ABCD><STND>1</STND><STND>2</STND></ABDG>"))
			v := r.run(3, refMsg(3, "GLST", styp, glst("B", "b2"), glst("C", "c")))
			require.Equal(t, succeeded, v.State, v.Reason)
			require.Equal(t, "GLST "+styp+": 2 records", v.Reason)
			require.Equal(t, []string{"B", "C"}, r.refKeys("GLST"))
			require.Equal(t, glstDoc("B", "b2"), r.ref("GLST", "B"))
			require.Equal(t, []string{"X"}, r.refKeys("ABDG"))
			require.Equal(t, map[string]any{"ABCD": "X", "STND": []any{"1", "2"}}, r.ref("ABDG", "X"))
			require.Empty(t, r.st.changes, "reference data changes no flight and emits no flight events")

			// An explicitly empty snapshot (RECS 0) empties the type.
			v = r.run(4, refMsg(4, "GLST", styp))
			require.Equal(t, succeeded, v.State)
			require.Empty(t, r.refKeys("GLST"))
			require.Equal(t, []string{"X"}, r.refKeys("ABDG"))
		})
	}
}

// TestReference_R_C10_InvalidRecordLeavesTheTypeUntouched: a record without
// its key (or a key twice) is DEAD(PROTOCOL) before any of the message's
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
			r := newRules(t)
			r.run(1, refMsg(1, "GLST", "ADD", glst("A", "a"), glst("B", "b")))
			st := &refusingSink{memStore: r.st}
			v := r.runWith(2, tc.raw, st)
			require.Equal(t, dead, v.State, v.Reason)
			require.Contains(t, v.Reason, tc.why)
			require.Zero(t, st.writes, "refused before any write")
			require.Equal(t, []string{"A", "B"}, r.refKeys("GLST"))
			require.Equal(t, succeeded, r.run(3, refMsg(3, "ABDG", "ADD", "<ABDG><ABCD>X</ABCD></ABDG>")).State)
		})
	}
}

// TestReference_R_C10_EveryCatalogueTypeHasAKey: each of the 23 reference
// types is stored by its key element (catalogue §6).
func TestReference_R_C10_EveryCatalogueTypeHasAKey(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	keys := map[string]string{
		"ABDG": "ABCD", "ABNR": "ANRC", "AIRC": "ITAT", "AIRL": "ITOP", "ARPT": "ITCD",
		"BLST": "BCOD", "CHLT": "CCOD", "CITY": "ITCD", "CLST": "CCOD", "COUL": "COUC",
		"DLYL": "DCOD", "FLTL": "FTYP", "GLST": "GCOD", "HLTR": "HLTC", "ORGN": "OGID",
		"PLST": "PCOD", "REGL": "REGC", "REGN": "RNUM", "SLST": "SCOD", "STTS": "STTC",
		"TLST": "TCOD", "VIPL": "VPCD", "VIPS": "VSCD",
	}
	require.Equal(t, keys, RefKeys)
	id := int64(0)
	for typ, key := range keys {
		id++
		v := r.run(id, refMsg(id, typ, "ADD", "<"+typ+"><"+key+">K"+typ+"</"+key+"><X>1</X></"+typ+">"))
		require.Equal(t, succeeded, v.State, "%s: %s", typ, v.Reason)
		require.Equal(t, []string{"K" + typ}, r.refKeys(typ))
	}
}
