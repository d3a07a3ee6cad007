package flight

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/sis"
)

// decodeBody decodes a message of the given TYPE/STYP around body.
func decodeBody(t *testing.T, typ, styp, body string) *sis.Message {
	t.Helper()
	raw := `<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><SEQN>1</SEQN>` +
		`<DTTM>20210123053000</DTTM><TYPE>` + typ + `</TYPE><STYP>` + styp + `</STYP></META>` + body + `</MSG>`
	m, err := sis.Decode([]byte(raw))
	require.NoError(t, err, raw)
	return m
}

// flopRecord is one FLOP record of flight 15 with the given payload.
func flopRecord(t *testing.T, styp, payload string) *sis.Node {
	t.Helper()
	m := decodeBody(t, "FLOP", styp, "<FLOP><FLID>15</FLID><FFID>YG-YG9015-A-23JAN210535-D</FFID>"+payload+"</FLOP>")
	return m.Root.Child("FLOP")
}

// baseDoc is a flight document holding a value for every FLOP family.
func baseDoc() Doc {
	return Doc{
		"FLID": "15", "ALCD": "YG", "FLNO": "YG9015", "MVIN": "A", "SODT": "23JAN210535",
		"FLTY": "W", "FLIN": "D", "ACFT": "733", "RENO": "B1", "STND": "504", "TRML": "T2",
		"APPT": "23JAN210500", "TOBT": "23JAN210510",
		"FHAG": "1", "PHAG": "2", "MHAG": "3", "VIPP": "2", "VIPR": "A",
		"EXSC": "RC", "EXSR": "remark", "TAOP": "YG", "TAFL": "YG9016", "TAID": "16",
		"FDIV": map[string]any{"@DDES": "HKG", "@DDIR": "TO", "#text": "WX"},
		"FRET": map[string]any{"@REID": "G", "#text": "door"},
		"FLAB": map[string]any{"@ARES": "O", "#text": "wind"},
		"DELY": []any{
			map[string]any{"@CODE": "RA", "@DURA": "0040", "#text": "late"},
			map[string]any{"@CODE": "PD", "@DURA": "0010"},
		},
		"PSDT": []any{map[string]any{"@PSNO": "1", "PSST": "504"}, map[string]any{"@PSNO": "2", "PSST": "505"}},
		"ERUT": []any{map[string]any{"@RTNO": "1", "APCD": "XIY"}, map[string]any{"@RTNO": "2", "APCD": "CTU"}},
		"SRVT": []any{map[string]any{"SRTC": "WATER", "SRQT": "1"}, map[string]any{"SRTC": "FUEL", "SRQT": "2"}},
		"VIPF": []any{map[string]any{"VPCD": "V1", "VFES": "3"}},
		"PSHT": []any{map[string]any{"@PSHN": "1", "PSTM": "23JAN210600", "PSID": "IN"}},
		"TIPT": []any{map[string]any{"TRTM": "23JAN210450", "TRST": "504"}},
		"PORT": []any{map[string]any{"POTM": "23JAN210550", "POID": "O"}},
		// the FFID flopRecord sends, kept by an earlier FLOP (R-C1)
		"VERBATIM": map[string]any{"FFID": "YG-YG9015-A-23JAN210535-D"},
	}
}

type flopCase struct {
	name    string
	styp    string
	payload string
	want    func(d Doc) // applied to a copy of baseDoc; nil: unchanged
	reject  string      // non-empty: a RejectError containing this
}

func runFLOPCases(t *testing.T, cases []flopCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cur := baseDoc()
			got, err := ApplyFLOP(cur, tc.styp, flopRecord(t, tc.styp, tc.payload))
			require.True(t, Equal(cur, baseDoc()), "ApplyFLOP must not modify its input")
			if tc.reject != "" {
				var rej *RejectError
				require.True(t, errors.As(err, &rej), "want a RejectError, got %v", err)
				require.Contains(t, rej.Reason, tc.reject)
				return
			}
			require.NoError(t, err)
			want := baseDoc()
			if tc.want != nil {
				tc.want(want)
			}
			require.Equal(t, string(want.Canonical()), string(got.Canonical()))
		})
	}
}

// TestApplyFLOP_R_C4_TimeSubtypes: every time subtype sets its element; both
// empty spellings clear it; absent changes nothing (FLOP-TOBT-1); a value
// that is not DDMMMYYHHMM is rejected.
//
// Validation 001§6 INV-14b "FLOP 逐类空标签语义".
func TestApplyFLOP_R_C4_TimeSubtypes(t *testing.T) {
	t.Parallel()
	var cases []flopCase
	for _, s := range []string{"APPT", "BOTM", "CNCL", "EGSR", "EGST", "FINT", "LACL", "PEDT", "NEAT", "PADT", "NAAT", "COBT", "CTOT", "EOBT", "TOBT", "IEST"} {
		cases = append(cases,
			flopCase{name: s + "/Set", styp: s, payload: "<" + s + ">24JAN210815</" + s + ">", want: func(d Doc) { d[s] = "24JAN210815" }},
			flopCase{name: s + "/OpenCloseEmptyClears", styp: s, payload: "<" + s + "></" + s + ">", want: func(d Doc) { delete(d, s) }},
			flopCase{name: s + "/SelfClosingClears", styp: s, payload: "<" + s + "/>", want: func(d Doc) { delete(d, s) }},
			flopCase{name: s + "/AbsentKeeps", styp: s, payload: ""},
			flopCase{name: s + "/InvalidRejected", styp: s, payload: "<" + s + ">2021-01-23</" + s + ">", reject: s},
		)
	}
	cases = append(cases,
		flopCase{name: "BlankIsEmpty", styp: "APPT", payload: "<APPT>  </APPT>", want: func(d Doc) { delete(d, "APPT") }},
		flopCase{name: "TrimmedValue", styp: "APPT", payload: "<APPT> 24JAN210815 </APPT>", want: func(d Doc) { d["APPT"] = "24JAN210815" }},
		flopCase{name: "OtherElementsKeptVerbatim", styp: "APPT", payload: "<TOBT/><APPT>24JAN210815</APPT>", want: func(d Doc) {
			d["APPT"] = "24JAN210815"
			d["VERBATIM"].(map[string]any)["FLOP"] = map[string]any{"APPT": map[string]any{"TOBT": ""}}
		}},
		flopCase{name: "BadMonth", styp: "CNCL", payload: "<CNCL>24XXX210815</CNCL>", reject: "CNCL"},
		flopCase{name: "BadHour", styp: "CNCL", payload: "<CNCL>24JAN212515</CNCL>", reject: "CNCL"},
	)
	runFLOPCases(t, cases)
}

// TestApplyFLOP_R_C4_CodeSubtypes: code subtypes set their element; ACFT,
// FLIN and FLTY can never be cleared; the others clear when empty.
//
// Validation 001§6 INV-14b "FLOP 逐类空标签语义".
func TestApplyFLOP_R_C4_CodeSubtypes(t *testing.T) {
	t.Parallel()
	var cases []flopCase
	for _, s := range []string{"ACFT", "RENO", "STND", "TRML", "MAXP", "FLIN", "FLTY", "FTSS", "REMC", "RUNW"} {
		v := "NEW1"
		if s == "FLIN" {
			v = "I" // FLIN is D, I or M
		}
		cases = append(cases,
			flopCase{name: s + "/Set", styp: s, payload: "<" + s + ">" + v + "</" + s + ">", want: func(d Doc) { d[s] = v }},
			flopCase{name: s + "/AbsentKeeps", styp: s, payload: ""},
		)
		if s == "ACFT" || s == "FLIN" || s == "FLTY" {
			cases = append(cases,
				flopCase{name: s + "/EmptyRejected", styp: s, payload: "<" + s + "/>", reject: "cannot be empty"},
				flopCase{name: s + "/OpenCloseEmptyRejected", styp: s, payload: "<" + s + "></" + s + ">", reject: "cannot be empty"})
			continue
		}
		cases = append(cases, flopCase{name: s + "/EmptyClears", styp: s, payload: "<" + s + "></" + s + ">", want: func(d Doc) { delete(d, s) }})
	}
	cases = append(cases, flopCase{name: "REMCChineseText", styp: "REMC", payload: "<REMC>Bag loading 延误</REMC>", want: func(d Doc) { d["REMC"] = "Bag loading 延误" }})
	runFLOPCases(t, cases)
}

// TestApplyFLOP_R_C4_IndependentAndLinkedScalars: HNAG and VIPP clear each
// element on its own; EXSS clears the remark with an empty code; TAOP
// removes the whole link when any of its three elements is empty.
//
// Validation 001§6 INV-14b "FLOP 逐类空标签语义".
func TestApplyFLOP_R_C4_IndependentAndLinkedScalars(t *testing.T) {
	t.Parallel()
	runFLOPCases(t, []flopCase{
		{name: "HNAG/SetOneClearOneKeepOne", styp: "HNAG", payload: "<FHAG>9</FHAG><PHAG/>",
			want: func(d Doc) { d["FHAG"] = "9"; delete(d, "PHAG") }},
		{name: "HNAG/AllThree", styp: "HNAG", payload: "<FHAG>7</FHAG><PHAG>8</PHAG><MHAG>9</MHAG>",
			want: func(d Doc) { d["FHAG"], d["PHAG"], d["MHAG"] = "7", "8", "9" }},
		{name: "HNAG/ClearAll", styp: "HNAG", payload: "<FHAG/><PHAG></PHAG><MHAG/>",
			want: func(d Doc) { delete(d, "FHAG"); delete(d, "PHAG"); delete(d, "MHAG") }},
		{name: "HNAG/NothingGiven", styp: "HNAG", payload: ""},
		{name: "VIPP/CountOnly", styp: "VIPP", payload: "<VIPP>3</VIPP>", want: func(d Doc) { d["VIPP"] = "3" }},
		{name: "VIPP/ClearRanking", styp: "VIPP", payload: "<VIPR></VIPR>", want: func(d Doc) { delete(d, "VIPR") }},
		{name: "VIPP/ClearCountSetRanking", styp: "VIPP", payload: "<VIPP/><VIPR>B</VIPR>",
			want: func(d Doc) { delete(d, "VIPP"); d["VIPR"] = "B" }},
		{name: "EXSS/CodeOnly", styp: "EXSS", payload: "<EXSC>RCFLOP</EXSC>", want: func(d Doc) { d["EXSC"] = "RCFLOP" }},
		{name: "EXSS/CodeAndRemark", styp: "EXSS", payload: "<EXSC>X</EXSC><EXSR>new</EXSR>", want: func(d Doc) { d["EXSC"], d["EXSR"] = "X", "new" }},
		{name: "EXSS/EmptyRemarkClearsRemark", styp: "EXSS", payload: "<EXSC>X</EXSC><EXSR/>", want: func(d Doc) { d["EXSC"] = "X"; delete(d, "EXSR") }},
		{name: "EXSS/EmptyCodeClearsBoth", styp: "EXSS", payload: "<EXSC></EXSC>", want: func(d Doc) { delete(d, "EXSC"); delete(d, "EXSR") }},
		{name: "EXSS/EmptyCodeWinsOverRemark", styp: "EXSS", payload: "<EXSC/><EXSR>ignored</EXSR>", want: func(d Doc) { delete(d, "EXSC"); delete(d, "EXSR") }},
		{name: "TAOP/SetLink", styp: "TAOP", payload: "<TAOP>CA</TAOP><TAFL>CA1</TAFL><TAID>20</TAID>",
			want: func(d Doc) { d["TAOP"], d["TAFL"], d["TAID"] = "CA", "CA1", "20" }},
		{name: "TAOP/OneValue", styp: "TAOP", payload: "<TAFL>YG1</TAFL>", want: func(d Doc) { d["TAFL"] = "YG1" }},
		{name: "TAOP/AnyEmptyRemovesLink", styp: "TAOP", payload: "<TAOP>CA</TAOP><TAFL>CA1</TAFL><TAID></TAID>",
			want: func(d Doc) { delete(d, "TAOP"); delete(d, "TAFL"); delete(d, "TAID") }},
		{name: "TAOP/EmptyOperatorRemovesLink", styp: "TAOP", payload: "<TAOP/>",
			want: func(d Doc) { delete(d, "TAOP"); delete(d, "TAFL"); delete(d, "TAID") }},
	})
}

// TestApplyFLOP_R_C4_AttributeAndTextSubtypes: FDIV, FRET, FLAB and DELY
// (catalogue §5.4).
//
// Validation 001§6 INV-14b "FLOP 逐类空标签语义".
func TestApplyFLOP_R_C4_AttributeAndTextSubtypes(t *testing.T) {
	t.Parallel()
	runFLOPCases(t, []flopCase{
		{name: "FDIV/To", styp: "FDIV", payload: `<FDIV DDES="CKG" DDIR="TO">THUNDERSTORM 雷雨</FDIV>`,
			want: func(d Doc) {
				d["FDIV"] = map[string]any{"@DDES": "CKG", "@DDIR": "TO", "#text": "THUNDERSTORM 雷雨"}
			}},
		{name: "FDIV/From", styp: "FDIV", payload: `<FDIV DDES="CKG" DDIR="FROM"></FDIV>`,
			want: func(d Doc) { d["FDIV"] = map[string]any{"@DDES": "CKG", "@DDIR": "FROM"} }},
		{name: "FDIV/EmptyDestinationClears", styp: "FDIV", payload: `<FDIV DDES="" DDIR="TO">x</FDIV>`, want: func(d Doc) { delete(d, "FDIV") }},
		{name: "FDIV/BareClears", styp: "FDIV", payload: `<FDIV/>`, want: func(d Doc) { delete(d, "FDIV") }},
		{name: "FDIV/Absent", styp: "FDIV", payload: ""},
		{name: "FDIV/DirectionTOO", styp: "FDIV", payload: `<FDIV DDES="HKG" DDIR="TOO">WX</FDIV>`, reject: `DDIR "TOO"`},
		{name: "FDIV/DirectionEmpty", styp: "FDIV", payload: `<FDIV DDES="HKG" DDIR="">WX</FDIV>`, reject: "DDIR"},
		{name: "FDIV/DirectionMissing", styp: "FDIV", payload: `<FDIV DDES="HKG">WX</FDIV>`, reject: "DDIR"},
		{name: "FRET/Ground", styp: "FRET", payload: `<FRET REID="G">EXIT DOOR FAULT</FRET>`,
			want: func(d Doc) { d["FRET"] = map[string]any{"@REID": "G", "#text": "EXIT DOOR FAULT"} }},
		{name: "FRET/EmptyTextClearsReason", styp: "FRET", payload: `<FRET REID="A"></FRET>`,
			want: func(d Doc) { d["FRET"] = map[string]any{"@REID": "A"} }},
		{name: "FRET/WholeElementEmptyClears", styp: "FRET", payload: `<FRET></FRET>`, want: func(d Doc) { delete(d, "FRET") }},
		{name: "FRET/TypeMissing", styp: "FRET", payload: `<FRET>reason</FRET>`, reject: "REID"},
		{name: "FRET/TypeOther", styp: "FRET", payload: `<FRET REID="X">reason</FRET>`, reject: "REID"},
		{name: "FLAB/Overshoot", styp: "FLAB", payload: `<FLAB ARES="O">POOR VISIBILITY</FLAB>`,
			want: func(d Doc) { d["FLAB"] = map[string]any{"@ARES": "O", "#text": "POOR VISIBILITY"} }},
		{name: "FLAB/Empty", styp: "FLAB", payload: `<FLAB/>`, want: func(d Doc) { delete(d, "FLAB") }},
		{name: "FLAB/EmptyAttributeOnlyRejected", styp: "FLAB", payload: `<FLAB ARES=""></FLAB>`, reject: "ARES"},
		{name: "FLAB/EmptyARESWithText", styp: "FLAB", payload: `<FLAB ARES="">WX</FLAB>`, reject: "ARES"},
		{name: "DELY/MergeByCode", styp: "DELY",
			payload: `<DELY CODE="AT" DURA="0015">flow</DELY><DELY CODE="RA" DURA="0050">later</DELY>`,
			want: func(d Doc) {
				d["DELY"] = []any{
					map[string]any{"@CODE": "RA", "@DURA": "0050", "#text": "later"},
					map[string]any{"@CODE": "PD", "@DURA": "0010"},
					map[string]any{"@CODE": "AT", "@DURA": "0015", "#text": "flow"},
				}
			}},
		{name: "DELY/BareClearsAll", styp: "DELY", payload: `<DELY></DELY>`, want: func(d Doc) { delete(d, "DELY") }},
		{name: "DELY/Absent", styp: "DELY", payload: ""},
		{name: "DELY/AttributesWithoutCode", styp: "DELY", payload: `<DELY CODE="" STRT="23JAN210600" DURA="0010">x</DELY>`, reject: "without CODE"},
		{name: "DELY/OneOfManyWithoutCode", styp: "DELY", payload: `<DELY CODE="ZZ">a</DELY><DELY DURA="0010">b</DELY>`, reject: "without CODE"},
	})
}

// TestApplyFLOP_R_C4_ListSubtypes: full-replace lists, lists merged by key
// (order and source sequence numbers kept), and which of them a bare
// element clears.
//
// Validation 001§6 INV-14b "FLOP 逐类空标签语义".
//
// Also names G-SRVT-VIPF, US-05, INV-14b.
func TestApplyFLOP_R_C4_ListSubtypes(t *testing.T) {
	t.Parallel()
	var cases []flopCase
	for _, s := range []string{"PSDT", "GTDT", "CKDT", "CHDT", "CLDT", "CHOT", "ABTM"} {
		seq := listRules[s].seq
		cases = append(cases,
			flopCase{name: s + "/Replace", styp: s, payload: "<" + s + " " + seq + `="2"><A>x</A></` + s + "><" + s + " " + seq + `="1"><A>y</A></` + s + ">",
				want: func(d Doc) {
					d[s] = []any{map[string]any{"@" + seq: "1", "A": "y"}, map[string]any{"@" + seq: "2", "A": "x"}}
				}},
			flopCase{name: s + "/SingleBecomesList", styp: s, payload: "<" + s + " " + seq + `="1"><A>x</A></` + s + ">",
				want: func(d Doc) { d[s] = []any{map[string]any{"@" + seq: "1", "A": "x"}} }},
			flopCase{name: s + "/EmptyRejected", styp: s, payload: "<" + s + "/>", reject: "can only be replaced"},
			flopCase{name: s + "/AbsentRejected", styp: s, payload: "", reject: "can only be replaced"},
		)
	}
	cases = append(cases,
		flopCase{name: "ERUT/MergeByRTNO", styp: "ERUT",
			payload: `<ERUT RTNO="2"><APCD>PEK</APCD><SCAT>23JAN210900</SCAT></ERUT><ERUT RTNO="3"><APCD>SHA</APCD></ERUT>`,
			want: func(d Doc) {
				d["ERUT"] = []any{
					map[string]any{"@RTNO": "1", "APCD": "XIY"},
					map[string]any{"@RTNO": "2", "APCD": "PEK", "SCAT": "23JAN210900"},
					map[string]any{"@RTNO": "3", "APCD": "SHA"},
				}
			}},
		flopCase{name: "ERUT/BareClears", styp: "ERUT", payload: `<ERUT></ERUT>`, want: func(d Doc) { delete(d, "ERUT") }},
		flopCase{name: "SRVT/MergeBySRTC", styp: "SRVT",
			payload: `<SRVT><SRTC>FUEL</SRTC><SRQT>5</SRQT><SRPR></SRPR></SRVT><SRVT><SRTC>GPU</SRTC><SRQT>1</SRQT></SRVT>`,
			want: func(d Doc) {
				d["SRVT"] = []any{
					map[string]any{"SRTC": "WATER", "SRQT": "1"},
					map[string]any{"SRTC": "FUEL", "SRQT": "5", "SRPR": ""},
					map[string]any{"SRTC": "GPU", "SRQT": "1"},
				}
			}},
		flopCase{name: "SRVT/BareClears", styp: "SRVT", payload: `<SRVT/>`, want: func(d Doc) { delete(d, "SRVT") }},
		flopCase{name: "VIPF/MergeByVPCD", styp: "VIPF",
			payload: `<VIPF><VPCD>V1</VPCD><VFES>5</VFES><VIPT><VSCD>S1</VSCD></VIPT></VIPF><VIPF><VPCD>V2</VPCD><VFES>0</VFES></VIPF>`,
			want: func(d Doc) {
				d["VIPF"] = []any{
					map[string]any{"VPCD": "V1", "VFES": "5", "VIPT": []any{map[string]any{"VSCD": "S1"}}},
					map[string]any{"VPCD": "V2", "VFES": "0"},
				}
			}},
		flopCase{name: "VIPF/BareNeverDeletes", styp: "VIPF", payload: `<VIPF/>`},
		flopCase{name: "PSHT/MergeByPSHN", styp: "PSHT",
			payload: `<PSHT PSHN="1"><PSTM>23JAN210610</PSTM><PSID>OUT</PSID></PSHT><PSHT PSHN="2"><PSTM>23JAN210700</PSTM></PSHT>`,
			want: func(d Doc) {
				d["PSHT"] = []any{
					map[string]any{"@PSHN": "1", "PSTM": "23JAN210610", "PSID": "OUT"},
					map[string]any{"@PSHN": "2", "PSTM": "23JAN210700"},
				}
			}},
		flopCase{name: "PSHT/BareKeeps", styp: "PSHT", payload: `<PSHT/>`},
		flopCase{name: "TIPT/MergeByTRST", styp: "TIPT",
			payload: `<TIPT><TRTM>23JAN210455</TRTM><TRST>504</TRST></TIPT><TIPT><TRTM>23JAN210600</TRTM><TRST>505</TRST></TIPT>`,
			want: func(d Doc) {
				d["TIPT"] = []any{
					map[string]any{"TRTM": "23JAN210455", "TRST": "504"},
					map[string]any{"TRTM": "23JAN210600", "TRST": "505"},
				}
			}},
		flopCase{name: "PORT/MergeByPOID", styp: "PORT",
			payload: `<PORT><POTM>23JAN210620</POTM><POID>C</POID></PORT>`,
			want: func(d Doc) {
				d["PORT"] = []any{
					map[string]any{"POTM": "23JAN210550", "POID": "O"},
					map[string]any{"POTM": "23JAN210620", "POID": "C"},
				}
			}},
		flopCase{name: "PORT/EmptyTimeClearsThatDoor", styp: "PORT",
			payload: `<PORT><POTM></POTM><POID>O</POID></PORT>`,
			want:    func(d Doc) { d["PORT"] = []any{map[string]any{"POTM": "", "POID": "O"}} }},
		flopCase{name: "UnknownSubtype", styp: "XXXX", payload: `<XXXX>1</XXXX>`, reject: "no rule"},
		flopCase{name: "FDELIsNotAnUpdate", styp: "FDEL", payload: `<FDEL/>`, reject: "no rule"},
	)
	runFLOPCases(t, cases)
}

// TestApplyFLOP_R_C4_MergeIntoMissingList: a merged list starts empty on a
// flight that has none yet.
func TestApplyFLOP_R_C4_MergeIntoMissingList(t *testing.T) {
	t.Parallel()
	got, err := ApplyFLOP(Doc{"FLID": "15"}, "DELY", flopRecord(t, "DELY", `<DELY CODE="RA">x</DELY>`))
	require.NoError(t, err)
	ffid := map[string]any{"FFID": "YG-YG9015-A-23JAN210535-D"}
	require.Equal(t, Doc{"FLID": "15", "DELY": []any{map[string]any{"@CODE": "RA", "#text": "x"}}, "VERBATIM": ffid}, got)
	got, err = ApplyFLOP(Doc{"FLID": "15"}, "ERUT", flopRecord(t, "ERUT", `<ERUT></ERUT>`))
	require.NoError(t, err)
	require.Equal(t, Doc{"FLID": "15", "VERBATIM": ffid}, got)
}
