package flight

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireReject asserts that applying payload as a FLOP of styp to baseDoc
// is rejected with a reason containing want.
func requireReject(t *testing.T, styp, payload, want string) {
	t.Helper()
	_, err := ApplyFLOP(baseDoc(), styp, flopRecord(t, styp, payload))
	var rej *RejectError
	require.True(t, errors.As(err, &rej), "%s %s: want a RejectError, got %v", styp, payload, err)
	require.Contains(t, rej.Reason, want, "%s %s", styp, payload)
}

// TestFlop_R_C4_EmptyAttributesAreNotBare: only an element without
// attributes and without content is "bare" (present but empty: it clears).
// An element whose attributes are all empty still says something, and the
// subtype's rules judge it — for FLAB, FRET and DELY an empty code
// attribute is a missing code, and the message is rejected (catalogue §5.4:
// "ARES empty ⇒ rejected"); the same holds for the sequence and key of
// every list subtype and for attributes on single-value elements.
func TestFlop_R_C4_EmptyAttributesAreNotBare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ styp, payload, want string }{
		{"FLAB", `<FLAB ARES=""></FLAB>`, `ARES ""`},
		{"FLAB", `<FLAB ARES=""/>`, `ARES ""`},
		{"FRET", `<FRET REID=""></FRET>`, `REID ""`},
		{"FRET", `<FRET REID="  "/>`, `REID ""`},
		{"DELY", `<DELY CODE="" STRT="15DEC031605" DURA="0200"></DELY>`, "without CODE"},
		{"DELY", `<DELY CODE=""></DELY>`, "without CODE"},
		{"DELY", `<DELY STRT="15DEC031605"/>`, "without CODE"},
		{"FDIV", `<FDIV DDES="" DDIR=""></FDIV>`, "DDIR"},
		{"ERUT", `<ERUT RTNO=""></ERUT>`, "RTNO"},
		{"PSHT", `<PSHT PSHN=""/>`, "PSHN"},
		{"PSDT", `<PSDT PSNO=""></PSDT>`, "PSNO"},
		{"GTDT", `<GTDT GTNO=""/>`, "GTNO"},
		{"APPT", `<APPT TZ=""></APPT>`, "single value"},
		{"STND", `<STND CODE=""/>`, "single value"},
		{"HNAG", `<FHAG X=""/>`, "single value"},
		{"EXSS", `<EXSC X=""/>`, "single value"},
		{"TAOP", `<TAID X=""/>`, "single value"},
		{"FLAB", `<FLAB ARES="G"><X/></FLAB>`, "child elements"},
	} {
		requireReject(t, tc.styp, tc.payload, tc.want)
	}

	// The bare forms still clear, or change nothing where the rule says so.
	for _, tc := range []struct{ styp, payload, key string }{
		{"FLAB", `<FLAB></FLAB>`, "FLAB"}, {"FLAB", `<FLAB/>`, "FLAB"},
		{"FRET", `<FRET/>`, "FRET"}, {"FDIV", `<FDIV> </FDIV>`, "FDIV"},
		{"DELY", `<DELY></DELY>`, "DELY"}, {"ERUT", `<ERUT/>`, "ERUT"}, {"SRVT", `<SRVT></SRVT>`, "SRVT"},
	} {
		got, err := ApplyFLOP(baseDoc(), tc.styp, flopRecord(t, tc.styp, tc.payload))
		require.NoError(t, err, tc.payload)
		require.NotContains(t, got, tc.key, tc.payload)
	}
	// FDIV keeps its own catalogue rule: an empty DDES with a valid DDIR
	// clears the diversion.
	got, err := ApplyFLOP(baseDoc(), "FDIV", flopRecord(t, "FDIV", `<FDIV DDES="" DDIR="TO">x</FDIV>`))
	require.NoError(t, err)
	require.NotContains(t, got, "FDIV")
}

// TestFlop_R_C4_ValuesAreCheckedWhereTheCatalogueGivesAFormat: DELY STRT
// (DDMMMYYHHMM) and DURA (HHMM), the times inside the list subtypes, and
// the codes with a fixed domain are checked; a bad value rejects the
// message (the processor makes it DEAD(PROTOCOL), nothing written).
func TestFlop_R_C4_ValuesAreCheckedWhereTheCatalogueGivesAFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ styp, payload, want string }{
		{"DELY", `<DELY CODE="RA" STRT="15DEC03160"/>`, "STRT"},
		{"DELY", `<DELY CODE="RA" STRT="15XXX031605"/>`, "STRT"},
		{"DELY", `<DELY CODE="RA" STRT="+5DEC031605"/>`, "STRT"},
		{"DELY", `<DELY CODE="RA" DURA="2:00"/>`, "DURA"},
		{"DELY", `<DELY CODE="RA" DURA="0260"/>`, "DURA"},
		{"DELY", `<DELY CODE="RA" DURA="+200"/>`, "DURA"},
		{"DELY", `<DELY CODE="RA" DURA="200"/>`, "DURA"},
		{"PSDT", `<PSDT PSNO="1"><PSST>504</PSST><STST>23JAN21</STST></PSDT>`, "STST"},
		{"PSDT", `<PSDT PSNO="1"><PSST>504</PSST><STET>23JAN212400</STET></PSDT>`, "STET"},
		{"GTDT", `<GTDT GTNO="1"><GATE>G1</GATE><PGOT>x</PGOT></GTDT>`, "PGOT"},
		{"GTDT", `<GTDT GTNO="1"><GATE>G1</GATE><GCTM>31FEB211200</GCTM></GTDT>`, "GCTM"},
		{"CKDT", `<CKDT CKNO="1"><PCOT>23JAN21-100</PCOT></CKDT>`, "PCOT"},
		{"CKDT", `<CKDT CKNO="1"><CCTM>23JAN21 100</CCTM></CKDT>`, "CCTM"},
		{"CHDT", `<CHDT CHNO="1"><CBTM>2021-01-23</CBTM></CHDT>`, "CBTM"},
		{"CLDT", `<CLDT CLNO="1"><PCCT>23JAN211299</PCCT></CLDT>`, "PCCT"},
		{"CHOT", `<CHOT CSNO="1"><CHTM>23JAN2112</CHTM></CHOT>`, "CHTM"},
		{"ABTM", `<ABTM ASNO="1"><AOTM>nope</AOTM></ABTM>`, "AOTM"},
		{"ERUT", `<ERUT RTNO="1"><APCD>XIY</APCD><SCAT>bad</SCAT></ERUT>`, "SCAT"},
		{"ERUT", `<ERUT RTNO="1"><APCD>XIY</APCD><SCDT>23JAN21+530</SCDT></ERUT>`, "SCDT"},
		{"SRVT", `<SRVT><SRTC>W</SRTC><SRQT>1</SRQT><SRST>x</SRST></SRVT>`, "SRST"},
		{"PORT", `<PORT><POTM>23JAN2105</POTM><POID>O</POID></PORT>`, "POTM"},
		{"PSHT", `<PSHT PSHN="1"><PSTM>x</PSTM></PSHT>`, "PSTM"},
		{"TIPT", `<TIPT><TRTM>x</TRTM><TRST>504</TRST></TIPT>`, "TRTM"},
		{"FLIN", `<FLIN>X</FLIN>`, `FLIN "X"`},
		{"PORT", `<PORT><POTM>23JAN210550</POTM><POID>X</POID></PORT>`, `POID "X"`},
		{"FRET", `<FRET REID="B">x</FRET>`, `REID "B"`},
		{"FLAB", `<FLAB ARES="A">x</FLAB>`, `ARES "A"`},
		{"APPT", `<APPT>+3JAN210815</APPT>`, "two digits"},
	} {
		requireReject(t, tc.styp, tc.payload, tc.want)
	}
	// Valid values and empty optional times pass.
	for _, tc := range []struct{ styp, payload string }{
		{"DELY", `<DELY CODE="RA" STRT="15DEC031605" DURA="0200">x</DELY>`},
		{"DELY", `<DELY CODE="RA" STRT="" DURA="">x</DELY>`},
		{"DELY", `<DELY CODE="RA" DURA="9959"/>`},
		{"GTDT", `<GTDT GTNO="1"><GATE>G1</GATE><PGOT>23JAN210500</PGOT><GOTM></GOTM></GTDT>`},
		{"PORT", `<PORT><POTM></POTM><POID>C</POID></PORT>`},
		{"FLIN", `<FLIN>M</FLIN>`},
	} {
		_, err := ApplyFLOP(baseDoc(), tc.styp, flopRecord(t, tc.styp, tc.payload))
		require.NoError(t, err, tc.payload)
	}
}

// TestParseDateTime_R_C4_TwoDigitsPerField: a SIS time has exactly two
// ASCII digits per numeric field — no sign, no blank (Sscanf-style parsing
// read "+5" as 5); durations likewise.
func TestParseDateTime_R_C4_TwoDigitsPerField(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"+5JAN210535", "-5JAN210535", " 5JAN210535x", "05JAN+10535", "05JAN21+535", "05JAN2105+5", "05JAN21 535", "05JAN21053５"} {
		_, err := ParseDateTime(s, timeZoneless)
		require.Error(t, err, s)
	}
	got, err := ParseDateTime(" 05JAN210535 ", timeZoneless)
	require.NoError(t, err)
	require.Equal(t, "2021-01-05 05:35", got.Format("2006-01-02 15:04"))
	for _, s := range []string{"+100", "-100", "1 00", "0060", "00:0", ""} {
		require.Error(t, CheckDuration(s), s)
	}
	require.NoError(t, CheckDuration("0200"))
	require.False(t, isHHMM("+100"), "SCHS SCHT: no sign either")
	require.True(t, isHHMM("2359"))
}

// TestFlop_R_C3_MergedListsNeedTheirKey: an entry of a merged list without
// its key (or, for ERUT and SRVT, without APCD / SRQT) is rejected — an
// entry without a key could never be matched, so merging the same content
// twice would append it twice; with keys, merging twice is a no-op
// (INV-20b).
func TestFlop_R_C3_MergedListsNeedTheirKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ styp, payload, want string }{
		{"ERUT", `<ERUT><APCD>PEK</APCD></ERUT>`, "RTNO"},
		{"ERUT", `<ERUT RTNO="x"><APCD>PEK</APCD></ERUT>`, "RTNO"},
		{"ERUT", `<ERUT RTNO="0"><APCD>PEK</APCD></ERUT>`, "RTNO"},
		{"ERUT", `<ERUT RTNO="3"><SCAT>23JAN210900</SCAT></ERUT>`, "APCD"},
		{"ERUT", `<ERUT RTNO="3"><APCD></APCD></ERUT>`, "APCD"},
		{"SRVT", `<SRVT><SRQT>1</SRQT></SRVT>`, "SRTC"},
		{"SRVT", `<SRVT><SRTC>FUEL</SRTC></SRVT>`, "SRQT"},
		{"SRVT", `<SRVT><SRTC>FUEL</SRTC><SRQT/></SRVT>`, "SRQT"},
		{"PORT", `<PORT><POTM>23JAN210620</POTM></PORT>`, "POID"},
		{"VIPF", `<VIPF><VFES>3</VFES></VIPF>`, "VPCD"},
		{"PSHT", `<PSHT><PSTM>23JAN210610</PSTM></PSHT>`, "PSHN"},
		{"TIPT", `<TIPT><TRTM>23JAN210455</TRTM></TIPT>`, "TRST"},
		{"ERUT", `<ERUT RTNO="4"><APCD>PEK</APCD></ERUT><ERUT/>`, "RTNO"},
	} {
		requireReject(t, tc.styp, tc.payload, tc.want)
	}

	for _, tc := range []struct{ styp, payload string }{
		{"ERUT", `<ERUT RTNO="2"><APCD>PEK</APCD></ERUT><ERUT RTNO="3"><APCD>SHA</APCD></ERUT>`},
		{"SRVT", `<SRVT><SRTC>GPU</SRTC><SRQT>5</SRQT><SRPR></SRPR></SRVT>`},
		{"VIPF", `<VIPF><VPCD>V2</VPCD><VFES>0</VFES></VIPF>`},
		{"PSHT", `<PSHT PSHN="2"><PSTM>23JAN210700</PSTM></PSHT>`},
		{"TIPT", `<TIPT><TRTM>23JAN210600</TRTM><TRST>505</TRST></TIPT>`},
		{"PORT", `<PORT><POTM>23JAN210620</POTM><POID>C</POID></PORT>`},
		{"DELY", `<DELY CODE="AT" DURA="0015">flow</DELY>`},
	} {
		rec := flopRecord(t, tc.styp, tc.payload)
		once, err := ApplyFLOP(baseDoc(), tc.styp, rec)
		require.NoError(t, err, tc.payload)
		twice, err := ApplyFLOP(once, tc.styp, rec)
		require.NoError(t, err, tc.payload)
		require.Equal(t, string(once.Canonical()), string(twice.Canonical()), "%s merged twice", tc.styp)
		require.Greater(t, len(once[tc.styp].([]any)), len(baseDoc()[tc.styp].([]any)), "%s: the new entry is added once", tc.styp)
	}
}

// TestFlop_R_C4_ListOrderFollowsTheSequenceNumber: lists with a sequence
// attribute (PSNO, GTNO, …, RTNO, PSHN) are stored in sequence order, not
// in arrival order; a replaced list with a sequence number twice is
// rejected.
func TestFlop_R_C4_ListOrderFollowsTheSequenceNumber(t *testing.T) {
	t.Parallel()
	got, err := ApplyFLOP(baseDoc(), "PSDT", flopRecord(t, "PSDT",
		`<PSDT PSNO="3"><PSST>S3</PSST></PSDT><PSDT PSNO="1"><PSST>S1</PSST></PSDT><PSDT PSNO="10"><PSST>S10</PSST></PSDT><PSDT PSNO="2"><PSST>S2</PSST></PSDT>`))
	require.NoError(t, err)
	require.Equal(t, []any{
		map[string]any{"@PSNO": "1", "PSST": "S1"}, map[string]any{"@PSNO": "2", "PSST": "S2"},
		map[string]any{"@PSNO": "3", "PSST": "S3"}, map[string]any{"@PSNO": "10", "PSST": "S10"},
	}, got["PSDT"])

	// ERUT RTNO 3 arrives before RTNO 0…: the merged list is 1, 2, 3 by RTNO
	// whatever the arrival order; RTNO 1 given again replaces in place.
	d := baseDoc()
	d["ERUT"] = []any{map[string]any{"@RTNO": "3", "APCD": "SHA"}}
	got, err = ApplyFLOP(d, "ERUT", flopRecord(t, "ERUT", `<ERUT RTNO="2"><APCD>CTU</APCD></ERUT><ERUT RTNO="1"><APCD>XIY</APCD></ERUT>`))
	require.NoError(t, err)
	require.Equal(t, []any{
		map[string]any{"@RTNO": "1", "APCD": "XIY"}, map[string]any{"@RTNO": "2", "APCD": "CTU"}, map[string]any{"@RTNO": "3", "APCD": "SHA"},
	}, got["ERUT"])
	got, err = ApplyFLOP(got, "ERUT", flopRecord(t, "ERUT", `<ERUT RTNO="01"><APCD>PEK</APCD></ERUT>`))
	require.NoError(t, err)
	require.Len(t, got["ERUT"], 3, "RTNO 01 is RTNO 1")
	require.Equal(t, "PEK", got["ERUT"].([]any)[0].(map[string]any)["APCD"])

	requireReject(t, "GTDT", `<GTDT GTNO="1"><GATE>A</GATE></GTDT><GTDT GTNO="1"><GATE>B</GATE></GTDT>`, "GTNO 1 occurs twice")

	// A daily flight record is ordered the same way, so a snapshot and a
	// FLOP with the same content leave the same document.
	m := decodeBody(t, "SCHD", "DNLD", "<SCHD><RECS>1</RECS><FLTR>"+requiredXML+
		`<PSDT PSNO="2"><PSST>S2</PSST></PSDT><PSDT PSNO="1"><PSST>S1</PSST></PSDT>`+
		`<ERUT RTNO="2"><APCD>CTU</APCD></ERUT><ERUT RTNO="1"><APCD>XIY</APCD></ERUT></FLTR></SCHD>`)
	r, err := FromFLTR(m.Root.Child("SCHD").Child("FLTR"), shanghai(t))
	require.NoError(t, err)
	require.Equal(t, []any{map[string]any{"@PSNO": "1", "PSST": "S1"}, map[string]any{"@PSNO": "2", "PSST": "S2"}}, r.Doc["PSDT"])
	require.Equal(t, []any{map[string]any{"@RTNO": "1", "APCD": "XIY"}, map[string]any{"@RTNO": "2", "APCD": "CTU"}}, r.Doc["ERUT"])
}

// TestFlop_R_C1_FFIDAndExtraElementsAreKept: nothing of a FLOP record is
// dropped: its FFID is kept as VERBATIM.FFID and every element outside
// FLID, FFID and the subtype's payload under VERBATIM.FLOP.<STYP>, as
// sent; the next record of that subtype replaces them.
func TestFlop_R_C1_FFIDAndExtraElementsAreKept(t *testing.T) {
	t.Parallel()
	rec := decodeBody(t, "FLOP", "STND", `<FLOP><FLID>15</FLID><FFID>CA-CA101-A-12DEC031345-D</FFID>`+
		`<STND>S209</STND><NOTE LANG="zh">备注</NOTE><TOBT/><XTRA>a</XTRA><XTRA>b</XTRA></FLOP>`).Root.Child("FLOP")
	got, err := ApplyFLOP(Doc{"FLID": "15"}, "STND", rec)
	require.NoError(t, err)
	require.Equal(t, Doc{
		"FLID": "15", "STND": "S209",
		"VERBATIM": map[string]any{
			"FFID": "CA-CA101-A-12DEC031345-D",
			"FLOP": map[string]any{"STND": map[string]any{
				"NOTE": map[string]any{"@LANG": "zh", "#text": "备注"}, "TOBT": "", "XTRA": []any{"a", "b"},
			}},
		},
	}, got)

	// Another subtype keeps its own extras; a record of STND without
	// extras removes STND's; an empty FFID removes it.
	got, err = ApplyFLOP(got, "RENO", flopRecord(t, "RENO", `<RENO>B1</RENO><RMK>x</RMK>`))
	require.NoError(t, err)
	require.Equal(t, "YG-YG9015-A-23JAN210535-D", got["VERBATIM"].(map[string]any)["FFID"])
	require.Equal(t, map[string]any{"RMK": "x"}, got["VERBATIM"].(map[string]any)["FLOP"].(map[string]any)["RENO"])
	require.Contains(t, got["VERBATIM"].(map[string]any)["FLOP"], "STND")
	rec = decodeBody(t, "FLOP", "STND", `<FLOP><FLID>15</FLID><FFID/><STND>S210</STND></FLOP>`).Root.Child("FLOP")
	got, err = ApplyFLOP(got, "STND", rec)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"FLOP": map[string]any{"RENO": map[string]any{"RMK": "x"}}}, got["VERBATIM"])
}

// TestFlop_R_C3_ClearAndSnapshotEmptyAreOneRepresentation: a FLOP clear
// and a daily flight record with the element present but empty leave the
// same document (the key is absent), so a snapshot with an empty element
// after a FLOP clear changes nothing; and replacing a flight by its
// snapshot record keeps what the FLOPs kept verbatim (KeepFLOPVerbatim).
func TestFlop_R_C3_ClearAndSnapshotEmptyAreOneRepresentation(t *testing.T) {
	t.Parallel()
	fltr := func(extra string) Doc {
		m := decodeBody(t, "SCHD", "DNLD", "<SCHD><RECS>1</RECS><FLTR>"+requiredXML+extra+"</FLTR></SCHD>")
		r, err := FromFLTR(m.Root.Child("SCHD").Child("FLTR"), shanghai(t))
		require.NoError(t, err)
		return r.Doc
	}
	withValues := fltr(`<APPT>23JAN210500</APPT><RENO>B1</RENO><FDIV DDES="HKG" DDIR="TO">WX</FDIV><DELY CODE="RA">x</DELY><ERUT RTNO="1"><APCD>XIY</APCD></ERUT>`)
	cleared := withValues
	for _, f := range []struct{ styp, payload string }{
		{"APPT", "<APPT/>"}, {"RENO", "<RENO></RENO>"}, {"FDIV", "<FDIV/>"}, {"DELY", "<DELY></DELY>"}, {"ERUT", "<ERUT/>"},
	} {
		var err error
		cleared, err = ApplyFLOP(cleared, f.styp, flopRecord(t, f.styp, f.payload))
		require.NoError(t, err)
	}
	snapshot := fltr(`<APPT></APPT><RENO/><FDIV/><DELY/><ERUT></ERUT>`)
	require.Equal(t, string(fltr("").Canonical()), string(snapshot.Canonical()), "empty elements of a snapshot are no value")
	next := KeepFLOPVerbatim(cleared, snapshot)
	require.Equal(t, string(cleared.Canonical()), string(next.Canonical()), "a snapshot with empty elements after FLOP clears changes nothing")

	// Empty members of repeated elements are dropped, the element too when
	// none remains (catalogue §2.7).
	d := fltr(`<DELY CODE="RA">x</DELY><DELY/><STND></STND>`)
	require.Equal(t, []any{map[string]any{"@CODE": "RA", "#text": "x"}}, d["DELY"])
	require.NotContains(t, d, "STND")
}

// TestFromFLTR_R_C4_CodeDomains: MVIN (A/D) and FLIN (D/I/M) of a daily
// flight record are checked; a record with another value is rejected (the
// whole package is refused).
func TestFromFLTR_R_C4_CodeDomains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ from, to, want string }{
		{"<MVIN>A</MVIN>", "<MVIN>X</MVIN>", `MVIN "X"`},
		{"<FLIN>D</FLIN>", "<FLIN>Q</FLIN>", `FLIN "Q"`},
	} {
		xml := requiredXML
		require.Contains(t, xml, tc.from)
		xml = strings.Replace(xml, tc.from, tc.to, 1)
		m := decodeBody(t, "SCHD", "DNLD", "<SCHD><RECS>1</RECS><FLTR>"+xml+"</FLTR></SCHD>")
		_, err := FromFLTR(m.Root.Child("SCHD").Child("FLTR"), shanghai(t))
		var rej *RejectError
		require.True(t, errors.As(err, &rej), "%s: %v", tc.to, err)
		require.Contains(t, rej.Reason, tc.want)
	}
}
