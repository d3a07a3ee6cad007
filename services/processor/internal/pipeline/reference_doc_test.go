package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReference_R_C10_INV26_EmptyMeansNullInTheStoredDocument pins the
// stored document contract (C-31, version 2): an empty element or
// attribute is JSON null (not deleted, not ""), an empty member of a
// repeated element is dropped, a repeatable element is an array even with
// one member, free text is kept as sent and codes are trimmed.
//
// Validation 001§6 INV-26/INV-27 "参考数据覆盖、全量替换、空标签、逐类门控".
func TestReference_R_C10_INV26_EmptyMeansNullInTheStoredDocument(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, refMsg(1, "ABDG", "DNLD",
		"<ABDG><ABCD> 208 </ABCD><DESC> Bridge 8 </DESC><CDSC>八号桥</CDSC><AHGT></AHGT><ATML>T2</ATML><ATHE>Y</ATHE>"+
			"<STND>112</STND><STND></STND><STND>111</STND><GATE/><GATE></GATE><AMNO>  </AMNO></ABDG>"))
	h.run(2, refMsg(2, "AIRL", "ADD",
		`<AIRL><ITOP>CA</ITOP><ONAM>Air China</ONAM><TRML MVIN="" FLIN="D">T3</TRML><TRML MVIN="A" FLIN=""></TRML>`+
			`<SUBC><CODE>CA1</CODE><NAME></NAME><NAMC/></SUBC></AIRL>`))
	require.Equal(t, StateSucceeded, h.state(1), h.proc(1).Reason)
	require.Equal(t, StateSucceeded, h.state(2), h.proc(2).Reason)
	require.Equal(t, []string{"208"}, h.refKeys("ABDG"), "the key is a code: trimmed")
	require.Equal(t, map[string]any{
		"ABCD": "208", "DESC": " Bridge 8 ", "CDSC": "八号桥", "AHGT": nil, "ATML": "T2", "ATHE": "Y",
		"STND": []any{"112", "111"}, "GATE": nil, "AMNO": nil,
	}, h.ref("ABDG", "208"))
	require.Equal(t, map[string]any{
		"ITOP": "CA", "ONAM": "Air China",
		"TRML": []any{
			map[string]any{"@MVIN": nil, "@FLIN": "D", "#text": "T3"},
			map[string]any{"@MVIN": "A", "@FLIN": nil, "#text": nil},
		},
		"SUBC": []any{map[string]any{"CODE": "CA1", "NAME": nil, "NAMC": nil}},
	}, h.ref("AIRL", "CA"))
}
