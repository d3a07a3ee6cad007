package flight

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rout builds one ROUT entry; times is "SCAT", "SCDT", "both" or "".
func rout(no int, apcd, times string) string {
	s := fmt.Sprintf(`<ROUT RTNO="%d"><APCD>%s</APCD>`, no, apcd)
	if times == "SCAT" || times == "both" {
		s += "<SCAT>23JAN210700</SCAT>"
	}
	if times == "SCDT" || times == "both" {
		s += "<SCDT>23JAN210300</SCDT>"
	}
	return s + "</ROUT>"
}

func routeEntry(no int, apcd string) map[string]any {
	return map[string]any{"@RTNO": fmt.Sprint(no), "APCD": apcd}
}

// TestFromFLTR_R_C4_RouteKeepsFourPerDirectionWithoutTimes pins the ROUT
// rule: SCAT/SCDT are not flight state, at most four entries per
// direction are kept in input order, the direction coming from the entry's
// time element or else the flight's MVIN, and the list as sent is kept
// under VERBATIM.ROUT whenever something was dropped.
func TestFromFLTR_R_C4_RouteKeepsFourPerDirectionWithoutTimes(t *testing.T) {
	t.Parallel()
	arrival := strings.Replace(requiredXML, "<MVIN>A</MVIN>", "<MVIN>A</MVIN>", 1)
	departure := strings.Replace(requiredXML, "<MVIN>A</MVIN>", "<MVIN>D</MVIN>", 1)
	cases := []struct {
		name     string
		fltr     string
		want     []any
		verbatim bool
	}{
		{name: "TimesRemoved", fltr: arrival + rout(1, "PEK", "SCDT"),
			want: []any{routeEntry(1, "PEK")}, verbatim: true},
		{name: "NoTimesNothingToKeep", fltr: departure + rout(1, "PEK", ""),
			want: []any{routeEntry(1, "PEK")}},
		{name: "FiveOutboundKeepsFirstFour", fltr: departure + rout(1, "A1", "SCAT") + rout(2, "A2", "SCAT") + rout(3, "A3", "SCAT") +
			rout(4, "A4", "SCAT") + rout(5, "A5", "SCAT"),
			want:     []any{routeEntry(1, "A1"), routeEntry(2, "A2"), routeEntry(3, "A3"), routeEntry(4, "A4")},
			verbatim: true},
		{name: "FourPerDirectionEach", fltr: departure +
			rout(1, "I1", "SCDT") + rout(2, "I2", "SCDT") + rout(3, "I3", "SCDT") + rout(4, "I4", "SCDT") + rout(5, "I5", "SCDT") +
			rout(6, "O1", "SCAT") + rout(7, "O2", "SCAT") + rout(8, "O3", "SCAT") + rout(9, "O4", "SCAT") + rout(10, "O5", "SCAT"),
			want: []any{routeEntry(1, "I1"), routeEntry(2, "I2"), routeEntry(3, "I3"), routeEntry(4, "I4"),
				routeEntry(6, "O1"), routeEntry(7, "O2"), routeEntry(8, "O3"), routeEntry(9, "O4")},
			verbatim: true},
		{name: "UntimedEntriesFollowMVINArrival", fltr: arrival + rout(1, "X1", "") + rout(2, "X2", "both") + rout(3, "X3", "") +
			rout(4, "X4", "") + rout(5, "X5", "") + rout(6, "Y1", "SCAT"),
			want:     []any{routeEntry(1, "X1"), routeEntry(2, "X2"), routeEntry(3, "X3"), routeEntry(4, "X4"), routeEntry(6, "Y1")},
			verbatim: true},
		{name: "FourUntimedNothingDropped", fltr: departure + rout(1, "X1", "") + rout(2, "X2", "") + rout(3, "X3", "") + rout(4, "X4", ""),
			want: []any{routeEntry(1, "X1"), routeEntry(2, "X2"), routeEntry(3, "X3"), routeEntry(4, "X4")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := decodeBody(t, "SCHD", "DNLD", "<SCHD><RECS>1</RECS><FLTR>"+tc.fltr+"</FLTR></SCHD>")
			fltr := m.Root.Child("SCHD").Child("FLTR")
			r, err := FromFLTR(fltr, shanghai(t))
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Doc["ROUT"])
			v, ok := verbatim(r.Doc, "ROUT")
			require.Equal(t, tc.verbatim, ok)
			if ok {
				sent := Doc{}
				addChildren(sent, fltr.Children)
				require.Equal(t, sent["ROUT"], v, "the list as sent is kept")
			}
		})
	}
}

// TestMerge_R_C9_INV14b_ADFTKeepsWhatItDoesNotCarry: an ad-hoc record
// replaces the elements it carries (lists as a whole) and keeps the rest;
// its ROUT and inbound derived elements replace their VERBATIM entries.
//
// Validation 001§6 INV-14b "增量未携带字段保留、显式清空才清除".
func TestMerge_R_C9_INV14b_ADFTKeepsWhatItDoesNotCarry(t *testing.T) {
	t.Parallel()
	cur := Doc{
		"FLID": "15", "ALCD": "YG", "FLNO": "YG9028", "MVIN": "A", "SODT": "23JAN210535", "FLTY": "W", "FLIN": "D", "ACFT": "733",
		"RENO": "B1", "STND": "504", "REMC": "keep me",
		"PSDT":     []any{map[string]any{"@PSNO": "1", "PSST": "504"}, map[string]any{"@PSNO": "2", "PSST": "505"}},
		"ROUT":     []any{routeEntry(1, "PEK")},
		"VERBATIM": map[string]any{"ROUT": []any{"old"}, "MAFL": "old"},
		"RUNSTATE": RunScheduled,
	}
	m := decodeBody(t, "SCHD", "ADFT", "<SCHD><RECS>1</RECS><FLTR>"+requiredXML+
		`<STND>601</STND><RENO></RENO><PSDT PSNO="1"><PSST>601</PSST></PSDT>`+rout(1, "XIY", "")+"</FLTR></SCHD>")
	r, err := FromFLTR(m.Root.Child("SCHD").Child("FLTR"), shanghai(t))
	require.NoError(t, err)
	got := Merge(cur, r)
	want := cur.Clone()
	want["STND"] = "601"
	delete(want, "RENO") // sent empty: no value, as a FLOP clear leaves it (R-C1, item 8)
	want["PSDT"] = []any{map[string]any{"@PSNO": "1", "PSST": "601"}}
	want["ROUT"] = []any{routeEntry(1, "XIY")}
	want["VERBATIM"] = map[string]any{"MAFL": "old"} // the new ROUT dropped nothing
	require.Equal(t, string(want.Canonical()), string(got.Canonical()))
	require.Equal(t, "B1", cur["RENO"], "Merge works on a copy")
	require.Equal(t, []string{"FLID", "ALCD", "FLNO", "MVIN", "SODT", "FLTY", "FLIN", "ACFT", "STND", "RENO", "PSDT", "ROUT"}, r.Sent)
}
