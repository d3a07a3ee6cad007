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

// TestReference_R_C10_OneShapeWhateverTheData: the JSON type of a field
// does not depend on the data: one member is an array; an attribute-only
// element with all attributes empty is null (and dropped from its list);
// structured members carry every declared key; elements outside the
// catalogue are kept under VERBATIM; a record that fits no shape (a single
// field twice, a text with attributes) is rejected before its type is
// written at all.
func TestReference_R_C10_OneShapeWhateverTheData(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	v := r.run(1, refMsg(1, "ABDG", "ADD", "<ABDG><ABCD>1</ABCD><STND>112</STND><GATE></GATE><AHGT/></ABDG>"))
	require.Equal(t, succeeded, v.State, v.Reason)
	require.Equal(t, map[string]any{"ABCD": "1", "STND": []any{"112"}, "GATE": nil, "AHGT": nil}, r.ref("ABDG", "1"))

	v = r.run(2, refMsg(2, "AIRL", "ADD",
		`<AIRL><ITOP>CA</ITOP><TRML MVIN="" FLIN=""></TRML><OGRP>STAR</OGRP><SUBC><CODE>CA1</CODE></SUBC><XTRA>x</XTRA><XTRA/></AIRL>`,
		`<AIRL><ITOP>MU</ITOP><TRML MVIN="A" FLIN="">T1</TRML><TRML>T2</TRML><SUBC><CODE/><NAME> </NAME></SUBC></AIRL>`))
	require.Equal(t, succeeded, v.State, v.Reason)
	require.Equal(t, map[string]any{
		"ITOP": "CA", "TRML": nil, "OGRP": []any{"STAR"},
		"SUBC":     []any{map[string]any{"CODE": "CA1", "NAME": nil, "NAMC": nil}},
		"VERBATIM": map[string]any{"XTRA": []any{"x"}},
	}, r.ref("AIRL", "CA"))
	require.Equal(t, map[string]any{
		"ITOP": "MU",
		"TRML": []any{
			map[string]any{"@MVIN": "A", "@FLIN": nil, "#text": "T1"},
			map[string]any{"@MVIN": nil, "@FLIN": nil, "#text": "T2"},
		},
		"SUBC": nil,
	}, r.ref("AIRL", "MU"))

	for i, rec := range []string{
		"<ABDG><ABCD>1</ABCD><DESC>a</DESC><DESC>b</DESC></ABDG>",
		`<ABDG><ABCD>1</ABCD><DESC LANG="en">a</DESC></ABDG>`,
		"<ABDG><ABCD>1</ABCD><STND><X>1</X></STND></ABDG>",
		`<AIRL><ITOP>CA</ITOP><TRML TYPE="x">T1</TRML></AIRL>`,
		`<AIRL><ITOP>CA</ITOP><SUBC><CODE>1</CODE><OTHER>2</OTHER></SUBC></AIRL>`,
	} {
		st := &refusingSink{memStore: r.st}
		typ := rec[1:5]
		v := r.runWith(int64(10+i), refMsg(int64(10+i), typ, "UPD", rec), st)
		require.Equal(t, dead, v.State, rec)
		require.Zero(t, st.writes, "the type is not updated at all: %s", rec)
		if typ == "ABDG" {
			require.Contains(t, v.Reason, "ABDG 1:")
		}
	}
}
