package decide

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil"
	"msgexchange/services/processor/internal/sistest"
)

// TestReference_R_C10_AddUpdUpsertDelDeletes: ADD and UPD upsert by key
// (either way round), DEL deletes by key (unknown keys are a no-op), and an
// empty element is stored as "no value"; other types are untouched.
//
// Validation 001§6 INV-26/INV-27 "参考数据覆盖、全量替换、空标签、逐类门控".
func TestReference_R_C10_AddUpdUpsertDelDeletes(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	r.run(1, refMsg(1, "ABDG", "ADD", "<ABDG><ABCD>X</ABCD></ABDG>"))
	for id, raw := range []string{
		refMsg(2, "GLST", "ADD", glst("A", "a")),
		refMsg(3, "GLST", "UPD", glst("B", "b")),  // UPD of a missing key inserts
		refMsg(4, "GLST", "ADD", glst("A", "a2")), // ADD of an existing key updates
		refMsg(5, "GLST", "UPD", "<GLST><GCOD>B</GCOD><GTNM></GTNM></GLST>"),
	} {
		v := r.run(int64(id+2), raw)
		require.Equal(t, succeeded, v.State, v.Reason)
		require.Empty(t, v.Changes, "reference data changes no flight")
	}
	require.Equal(t, []string{"A", "B"}, r.refKeys("GLST"))
	require.Equal(t, glstDoc("A", "a2"), r.ref("GLST", "A"))
	require.Equal(t, map[string]any{"GCOD": "B", "GTNM": nil}, r.ref("GLST", "B"), "an empty element means no value: JSON null")

	v := r.run(6, refMsg(6, "GLST", "DEL", "<GLST><GCOD>A</GCOD></GLST>", "<GLST><GCOD>ZZ</GCOD></GLST>"))
	require.Equal(t, succeeded, v.State, v.Reason)
	require.Equal(t, []string{"B"}, r.refKeys("GLST"))
	require.Equal(t, []string{"X"}, r.refKeys("ABDG"), "another type is untouched")
}

// TestReference_R_C10_INV26_EmptyMeansNullInTheStoredDocument pins the
// stored document contract (C-31, version 2): an empty element or
// attribute is JSON null (not deleted, not ""), an empty member of a
// repeated element is dropped, a repeatable element is an array even with
// one member, free text is kept as sent and codes are trimmed.
//
// Validation 001§6 INV-26/INV-27 "参考数据覆盖、全量替换、空标签、逐类门控".
func TestReference_R_C10_INV26_EmptyMeansNullInTheStoredDocument(t *testing.T) {
	t.Parallel()
	r := newRules(t)
	v := r.run(1, refMsg(1, "ABDG", "DNLD",
		"<ABDG><ABCD> 208 </ABCD><DESC> Bridge 8 </DESC><CDSC>八号桥</CDSC><AHGT></AHGT><ATML>T2</ATML><ATHE>Y</ATHE>"+
			"<STND>112</STND><STND></STND><STND>111</STND><GATE/><GATE></GATE><AMNO>  </AMNO></ABDG>"))
	require.Equal(t, succeeded, v.State, v.Reason)
	v = r.run(2, refMsg(2, "AIRL", "ADD",
		`<AIRL><ITOP>CA</ITOP><ONAM>Air China</ONAM><TRML MVIN="" FLIN="D">T3</TRML><TRML MVIN="A" FLIN=""></TRML>`+
			`<SUBC><CODE>CA1</CODE><NAME></NAME><NAMC/></SUBC></AIRL>`))
	require.Equal(t, succeeded, v.State, v.Reason)
	require.Equal(t, []string{"208"}, r.refKeys("ABDG"), "the key is a code: trimmed")
	require.Equal(t, map[string]any{
		"ABCD": "208", "DESC": " Bridge 8 ", "CDSC": "八号桥", "AHGT": nil, "ATML": "T2", "ATHE": "Y",
		"STND": []any{"112", "111"}, "GATE": nil, "AMNO": nil,
	}, r.ref("ABDG", "208"))
	require.Equal(t, map[string]any{
		"ITOP": "CA", "ONAM": "Air China",
		"TRML": []any{
			map[string]any{"@MVIN": nil, "@FLIN": "D", "#text": "T3"},
			map[string]any{"@MVIN": "A", "@FLIN": nil, "#text": nil},
		},
		"SUBC": []any{map[string]any{"CODE": "CA1", "NAME": nil, "NAMC": nil}},
	}, r.ref("AIRL", "CA"))
}

// TestReference_R_C10_EverySampleHasOneShapePerField runs every
// reference-data sample (the project's samples, and the shared corpus of
// real messages read in place) through the handlers and checks every
// stored document against the catalogue shapes: a repeatable element is
// always an array, even with one member; an empty value is always null.
//
// Also names INV-26, C-31, G-REF-DATA.
func TestReference_R_C10_EverySampleHasOneShapePerField(t *testing.T) {
	t.Parallel()
	dirs := map[string]string{"samples": sistest.SampleDir, "corpus": sistest.CorpusDir}
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := os.Stat(dir); err != nil {
				testutil.Unavailable(t, "sample directory "+dir, err)
			}
			files := sistest.ReferenceSamples(t, dir)
			require.NotEmpty(t, files)
			r := newRules(t)
			seen := map[string]bool{}
			for i, path := range files {
				raw, err := os.ReadFile(path)
				require.NoError(t, err)
				v := r.run(int64(i+1), string(raw))
				require.Equal(t, succeeded, v.State, "%s: %s", filepath.Base(path), v.Reason)
				typ := strings.SplitN(filepath.Base(path), "-", 2)[0]
				for _, key := range r.refKeys(typ) {
					for _, f := range sistest.CheckShape(t, typ, r.ref(typ, key)) {
						seen[typ+"."+f] = true
					}
				}
			}
			// The samples exercise the repeatable fields, once and repeated.
			for _, f := range []string{"ABDG.STND:array", "ABDG.GATE:array", "AIRL.TRML:array", "AIRL.SUBC:array",
				"AIRL.OGRP:array", "ARPT.ABBR:array", "COUL.REGC:array", "ORGN.OCAT:array", "ABDG.AHGT:null"} {
				require.True(t, seen[f], "no sample stored %s", f)
			}
		})
	}
}

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
