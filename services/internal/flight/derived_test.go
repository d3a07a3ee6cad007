package flight

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunningState_R_C4_PrecedenceAndReset pins the derived running state:
// each status element sets it, clearing it falls back to what the other
// elements say, and the precedence decides between several (R-C4,
// G-FLOP-SEMANTICS).
//
// Validation 001§6 INV-14b "FLOP 逐类空标签语义".
func TestRunningState_R_C4_PrecedenceAndReset(t *testing.T) {
	t.Parallel()
	fdiv := map[string]any{"@DDES": "HKG", "@DDIR": "TO", "#text": "WX"}
	cases := []struct {
		name string
		doc  Doc
		want string
	}{
		{"NothingIsScheduled", Doc{"MVIN": "D"}, RunScheduled},
		{"BoardingOpen", Doc{"MVIN": "D", "BOTM": "23JAN210500"}, RunBoarding},
		{"LastCallWinsOverBoarding", Doc{"MVIN": "D", "BOTM": "23JAN210500", "LACL": "23JAN210520"}, RunLastCall},
		{"LastCallAlone", Doc{"MVIN": "D", "LACL": "23JAN210520"}, RunLastCall},
		{"EmptyBoardingIsNoValue", Doc{"MVIN": "D", "BOTM": ""}, RunScheduled},
		{"BlankBoardingIsNoValue", Doc{"MVIN": "D", "BOTM": "  "}, RunScheduled},
		{"AbortedLanding", Doc{"MVIN": "A", "FLAB": map[string]any{"@ARES": "G", "#text": "VIS"}}, RunAbortedLanding},
		{"AbortedLandingWithoutValuesIsNone", Doc{"MVIN": "A", "FLAB": map[string]any{"@ARES": ""}}, RunScheduled},
		{"DepartedWinsOverLastCall", Doc{"MVIN": "D", "LACL": "x", "ACTT": "23JAN210540"}, RunDeparted},
		{"LandedWinsOverAbortedLanding", Doc{"MVIN": "A", "FLAB": map[string]any{"@ARES": "O"}, "ACTT": "23JAN210540"}, RunLanded},
		{"ReturnedWinsOverDeparted", Doc{"MVIN": "D", "ACTT": "x", "FRET": map[string]any{"@REID": "G"}}, RunReturned},
		{"DivertedWinsOverReturned", Doc{"MVIN": "A", "FDIV": fdiv, "FRET": map[string]any{"@REID": "A"}}, RunDiverted},
		{"DiversionWithoutDestinationIsNone", Doc{"MVIN": "A", "FDIV": map[string]any{"@DDES": " ", "@DDIR": "TO"}}, RunScheduled},
		{"CancelledWinsOverEverything", Doc{"MVIN": "A", "FDIV": fdiv, "BOTM": "x", "CNCL": "23JAN210400"}, RunCancelled},
		{"UnCancelledIsScheduledAgain", Doc{"MVIN": "D", "CNCL": ""}, RunScheduled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, RunningState(tc.doc))
		})
	}
}

// TestRunningState_R_C4_FLOPSetsAndResets applies the status subtypes
// through ApplyFLOP and Derive, as the processor does: BOTM and LACL set
// the running state and an empty element resets it; CNCL, FDIV, FRET and
// FLAB do the same for theirs.
func TestRunningState_R_C4_FLOPSetsAndResets(t *testing.T) {
	t.Parallel()
	steps := []struct {
		styp, payload, want string
	}{
		{"BOTM", "<BOTM>23JAN210500</BOTM>", RunBoarding},
		{"LACL", "<LACL>23JAN210520</LACL>", RunLastCall},
		{"LACL", "<LACL/>", RunBoarding},
		{"BOTM", "<BOTM></BOTM>", RunScheduled},
		{"FLAB", `<FLAB ARES="G">GO AROUND</FLAB>`, RunAbortedLanding},
		{"FRET", `<FRET REID="A">BIRD STRIKE</FRET>`, RunReturned},
		{"FDIV", `<FDIV DDES="CKG" DDIR="TO">WX</FDIV>`, RunDiverted},
		{"CNCL", "<CNCL>23JAN210600</CNCL>", RunCancelled},
		{"CNCL", "<CNCL/>", RunDiverted},
		{"FDIV", `<FDIV DDES="" DDIR="TO"/>`, RunReturned},
		{"FRET", `<FRET/>`, RunAbortedLanding},
		{"FLAB", `<FLAB/>`, RunScheduled},
	}
	d := Derive(Doc{"FLID": "15", "MVIN": "D"}, 15, nil)
	require.Equal(t, RunScheduled, d[KeyRunState])
	for i, s := range steps {
		next, err := ApplyFLOP(d, s.styp, flopRecord(t, s.styp, s.payload))
		require.NoError(t, err, "step %d", i)
		d = Derive(next, 15, nil)
		require.Equal(t, s.want, d[KeyRunState], "step %d: %s %s", i, s.styp, s.payload)
	}
}

// TestDerive_R_C8_INV21_MAFL: a master's MAFL lists its children as
// FLID+FLNO sorted by FLID, without itself or repeats; no children means no
// MAFL; the input is not modified.
//
// Validation 001§6 INV-21 "MAFL 投影".
func TestDerive_R_C8_INV21_MAFL(t *testing.T) {
	t.Parallel()
	in := Doc{"FLID": "15", "MAFL": []any{"stale"}}
	got := Derive(in, 15, []Child{{FLID: 18, FLNO: "CA18"}, {FLID: 15, FLNO: "self"}, {FLID: 16, FLNO: "MU16"}, {FLID: 18, FLNO: "CA18"}})
	require.Equal(t, []any{
		map[string]any{"FLID": "16", "FLNO": "MU16"},
		map[string]any{"FLID": "18", "FLNO": "CA18"},
	}, got[KeyMAFL])
	require.Equal(t, RunScheduled, got[KeyRunState])
	require.Equal(t, Doc{"FLID": "15", "MAFL": []any{"stale"}}, in, "Derive works on a copy")

	none := Derive(in, 15, []Child{{FLID: 15, FLNO: "self"}})
	require.NotContains(t, none, KeyMAFL)
	require.NotContains(t, Derive(Doc{"FLID": "15"}, 15, nil), KeyMAFL)
}

// TestFromFLTR_R_C8_InboundMAFLIsKeptVerbatimOnly: MAFL (and the other
// derived keys) in a snapshot record never become state: they are kept as
// sent under VERBATIM (R-C1) and Derive recomputes the real ones.
//
// Validation 001§6 INV-21 "MAFL 投影".
func TestFromFLTR_R_C8_InboundMAFLIsKeptVerbatimOnly(t *testing.T) {
	t.Parallel()
	m := decodeBody(t, "SCHD", "DNLD", "<SCHD><RECS>1</RECS><FLTR>"+requiredXML+
		"<MAFL><FLID>99</FLID><FLNO>XX1</FLNO></MAFL><RUNSTATE>LANDED</RUNSTATE></FLTR></SCHD>")
	r, err := FromFLTR(m.Root.Child("SCHD").Child("FLTR"), shanghai(t))
	require.NoError(t, err)
	require.NotContains(t, r.Doc, KeyMAFL)
	require.NotContains(t, r.Doc, KeyRunState)
	require.Equal(t, map[string]any{
		"MAFL":     map[string]any{"FLID": "99", "FLNO": "XX1"},
		"RUNSTATE": "LANDED",
	}, r.Doc[KeyVerbatim])
	d := Derive(r.Doc, 15, nil)
	require.NotContains(t, d, KeyMAFL)
	require.Equal(t, RunScheduled, d[KeyRunState])
	require.True(t, IsDerived("MAFL"))
	require.True(t, IsDerived("VERBATIM"))
	require.False(t, IsDerived("MAID"))
}
