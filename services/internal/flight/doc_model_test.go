package flight

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func shanghai(t *testing.T) OpDay {
	t.Helper()
	z, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	return OpDay{Zone: z}
}

const requiredXML = "<FLID>15</FLID><ALCD>YG</ALCD><FLNO>YG9028</FLNO><MVIN>A</MVIN><SODT>23JAN210535</SODT>" +
	"<FLTY>W</FLTY><FLIN>D</FLIN><ACFT>733</ACFT>"

// TestFromFLTR_R_C6_C1_KeepsEveryElement: a valid record becomes a lossless
// document: every element, attribute and repeated structure is kept, known
// lists are arrays even with one member, and unknown repeated elements too;
// the ROUT time the flight state does not keep (R-C4) stays under VERBATIM.
//
// Also names G-FLOP-UNMAPPED, US-05.
func TestFromFLTR_R_C6_C1_KeepsEveryElement(t *testing.T) {
	t.Parallel()
	m := decodeBody(t, "SCHD", "DNLD", "<SCHD><RECS>1</RECS><FLTR>"+requiredXML+
		`<ROUT RTNO = "1"><APCD>XIY</APCD><SCAT>23JAN210710</SCAT></ROUT>`+
		`<RENO>B2574</RENO><MAID></MAID><TAID>16</TAID>`+
		`<PSDT PSNO="1"><PSST>504</PSST><STST>23JAN210500</STST><STET>23JAN210600</STET></PSDT>`+
		`<ERUT RTNO="1"><APCD>XIY</APCD></ERUT><ERUT RTNO="2"><APCD>CTU</APCD></ERUT>`+
		`<XTRA>a</XTRA><XTRA>b</XTRA><NOTE LANG="zh">备注</NOTE>`+
		"</FLTR></SCHD>")
	r, err := FromFLTR(m.Root.Child("SCHD").Child("FLTR"), shanghai(t))
	require.NoError(t, err)
	require.Equal(t, int64(15), r.FLID)
	require.Equal(t, Doc{
		"FLID": "15", "ALCD": "YG", "FLNO": "YG9028", "MVIN": "A", "SODT": "23JAN210535", "FLTY": "W", "FLIN": "D", "ACFT": "733",
		"ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "XIY"}},
		"VERBATIM": map[string]any{
			"ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "XIY", "SCAT": "23JAN210710"}},
		},
		"RENO": "B2574",
		"TAID": "16",
		"PSDT": []any{map[string]any{"@PSNO": "1", "PSST": "504", "STST": "23JAN210500", "STET": "23JAN210600"}},
		"ERUT": []any{map[string]any{"@RTNO": "1", "APCD": "XIY"}, map[string]any{"@RTNO": "2", "APCD": "CTU"}},
		"XTRA": []any{"a", "b"},
		"NOTE": map[string]any{"@LANG": "zh", "#text": "备注"},
	}, r.Doc)
	_, ok := r.Doc.MasterFLID()
	require.False(t, ok, "an empty MAID is no master")
}

// TestFromFLTR_R_C6_RejectsInvalidRecords: a record missing (or with an
// empty) required element, an unreadable FLID or SODT is rejected, so the
// whole package is refused.
func TestFromFLTR_R_C6_RejectsInvalidRecords(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ xml, reason string }{}
	for _, name := range []string{"FLID", "ALCD", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT"} {
		start := strings.Index(requiredXML, "<"+name+">")
		end := strings.Index(requiredXML, "</"+name+">") + len("</"+name+">")
		cases["Missing"+name] = struct{ xml, reason string }{requiredXML[:start] + requiredXML[end:], "required element " + name}
		cases["Empty"+name] = struct{ xml, reason string }{requiredXML[:start] + "<" + name + ">  </" + name + ">" + requiredXML[end:], "required element " + name}
	}
	cases["RepeatedFLID"] = struct{ xml, reason string }{requiredXML + "<FLID>16</FLID>", "required element FLID"}
	cases["FLIDNotInteger"] = struct{ xml, reason string }{strings.Replace(requiredXML, "<FLID>15</FLID>", "<FLID>1.5</FLID>", 1), "FLID"}
	cases["FLIDZero"] = struct{ xml, reason string }{strings.Replace(requiredXML, "<FLID>15</FLID>", "<FLID>0</FLID>", 1), "positive"}
	cases["FLIDNegative"] = struct{ xml, reason string }{strings.Replace(requiredXML, "<FLID>15</FLID>", "<FLID>-15</FLID>", 1), "positive"}
	cases["SODTWrongFormat"] = struct{ xml, reason string }{strings.Replace(requiredXML, "23JAN210535", "2021-01-23 05:35", 1), "SIS time"}
	cases["SODTNoSuchDay"] = struct{ xml, reason string }{strings.Replace(requiredXML, "23JAN210535", "30FEB210535", 1), "no such day"}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := decodeBody(t, "SCHD", "DNLD", "<SCHD><RECS>1</RECS><FLTR>"+tc.xml+"</FLTR></SCHD>")
			_, err := FromFLTR(m.Root.Child("SCHD").Child("FLTR"), shanghai(t))
			var rej *RejectError
			require.True(t, errors.As(err, &rej), "want a RejectError, got %v", err)
			require.Contains(t, rej.Reason, tc.reason)
			require.True(t, strings.HasPrefix(rej.Error(), "rejected: "))
		})
	}
}

// TestDoc_R_C3_CanonicalAndEqual: the canonical form sorts keys at every
// level and does not escape HTML, so equality is independent of the order
// elements were sent in and a stored document compares equal to itself.
func TestDoc_R_C3_CanonicalAndEqual(t *testing.T) {
	t.Parallel()
	a := Doc{"b": "<x>&y", "a": map[string]any{"z": "1", "y": []any{"p", map[string]any{"k": "v", "j": "w"}}}}
	b := Doc{"a": map[string]any{"y": []any{"p", map[string]any{"j": "w", "k": "v"}}, "z": "1"}, "b": "<x>&y"}
	require.Equal(t, `{"a":{"y":["p",{"j":"w","k":"v"}],"z":"1"},"b":"<x>&y"}`, string(a.Canonical()))
	require.True(t, Equal(a, b))

	cases := map[string]Doc{
		"ValueDiffers":         {"b": "<x>&y", "a": map[string]any{"z": "2", "y": []any{"p", map[string]any{"k": "v", "j": "w"}}}},
		"ListOrderDiffers":     {"b": "<x>&y", "a": map[string]any{"z": "1", "y": []any{map[string]any{"k": "v", "j": "w"}, "p"}}},
		"KeyMissing":           {"a": map[string]any{"z": "1", "y": []any{"p", map[string]any{"k": "v", "j": "w"}}}},
		"EmptyStringIsAValue":  {"b": "<x>&y", "a": map[string]any{"z": "1", "y": []any{"p", map[string]any{"k": "v", "j": "w"}}}, "c": ""},
		"ScalarVersusOneEntry": {"b": []any{"<x>&y"}, "a": map[string]any{"z": "1", "y": []any{"p", map[string]any{"k": "v", "j": "w"}}}},
	}
	for name, d := range cases {
		require.False(t, Equal(a, d), name)
	}
}

// TestDoc_CloneIsDeep: a clone shares nothing with its source.
func TestDoc_CloneIsDeep(t *testing.T) {
	t.Parallel()
	src := Doc{"L": []any{map[string]any{"k": "v"}}, "M": map[string]any{"x": "1"}}
	c := src.Clone()
	c["L"].([]any)[0].(map[string]any)["k"] = "changed"
	c["M"].(map[string]any)["x"] = "2"
	c["N"] = "new"
	require.Equal(t, Doc{"L": []any{map[string]any{"k": "v"}}, "M": map[string]any{"x": "1"}}, src)
}

// TestDoc_Accessors pins String, Int64 and MasterFLID (the MAID code-share
// master used by the FDEL cascade, R-C5).
func TestDoc_Accessors(t *testing.T) {
	t.Parallel()
	d := Doc{"S": "abc", "N": "42", "E": "", "O": map[string]any{}, "MAID": "15"}
	require.Equal(t, "abc", d.String("S"))
	require.Equal(t, "", d.String("O"))
	require.Equal(t, "", d.String("missing"))
	n, ok := d.Int64("N")
	require.True(t, ok)
	require.Equal(t, int64(42), n)
	for _, k := range []string{"E", "S", "O", "missing"} {
		_, ok := d.Int64(k)
		require.False(t, ok, k)
	}
	m, ok := d.MasterFLID()
	require.True(t, ok)
	require.Equal(t, int64(15), m)
	for _, v := range []string{"", "0", "-1", "x"} {
		_, ok := Doc{"MAID": v}.MasterFLID()
		require.False(t, ok, v)
	}
	require.True(t, IsList("PSDT"))
	require.True(t, IsList("ROUT"))
	require.False(t, IsList("STND"))
}

// TestNodeValue_R_C1_Mapping pins the documented element → value mapping.
func TestNodeValue_R_C1_Mapping(t *testing.T) {
	t.Parallel()
	m := decodeBody(t, "ABDG", "ADD", `<ABDG><ABCD>A1</ABCD><DESC></DESC><STND>1</STND><STND></STND><STND>2</STND>`+
		`<ABBR CODE="ABR1">X</ABBR><TRML MVIN="" FLIN=""></TRML><SUB><CODE>c</CODE></SUB></ABDG>`)
	got := NodeValue(m.Root.Child("ABDG"))
	require.Equal(t, map[string]any{
		"ABCD": "A1", "DESC": "", "STND": []any{"1", "", "2"},
		"ABBR": map[string]any{"@CODE": "ABR1", "#text": "X"},
		"TRML": map[string]any{"@MVIN": "", "@FLIN": ""},
		"SUB":  map[string]any{"CODE": "c"},
	}, got)
}
