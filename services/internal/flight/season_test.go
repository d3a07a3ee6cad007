package flight

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const seasonFLTR = `<FLTR><ALCD>LH</ALCD><FLNO>LH724</FLNO><MVIN>D</MVIN><STDT>14NOV20</STDT><EDDT>14MAR21</EDDT>` +
	`<DYOP>1200560</DYOP><SCHT>1023</SCHT><FLTY>P</FLTY><FLIN>I</FLIN>` +
	`<ROUT RTNO="1"><APCD>HKG</APCD><SCAT>1125</SCAT><SCDT></SCDT></ROUT><ACFT>747</ACFT>` +
	`<ERUT RTNO="1"><APCD>CTU</APCD><SCAT>14MAR211023</SCAT><SADC>+1</SADC></ERUT></FLTR>`

func seasonBody(header, fltrs string) string {
	return "<SCHS>" + header + fltrs + "</SCHS>"
}

const seasonHeader = `<SNAM>Winter</SNAM><APCD>CTU</APCD><SDAT>10SEP20</SDAT><EDAT>10JUN21</EDAT>`

// TestParseSeason_R_C9_KeepsPatternsLosslessly: a valid package yields its
// window and every pattern as a lossless document (nothing normalised: a
// season ROUT keeps its HHMM times and empty SCDT).
func TestParseSeason_R_C9_KeepsPatternsLosslessly(t *testing.T) {
	t.Parallel()
	m := decodeBody(t, "SCHS", "DNLD", seasonBody(seasonHeader+"<RECS>1</RECS>", seasonFLTR))
	s, err := ParseSeason(m.Root.Child("SCHS"))
	require.NoError(t, err)
	require.Equal(t, "Winter", s.SNAM)
	require.Equal(t, "CTU", s.APCD)
	require.Equal(t, "10SEP20", s.SDAT)
	require.Equal(t, "10JUN21", s.EDAT)
	require.Equal(t, time.Date(2020, 9, 10, 0, 0, 0, 0, time.UTC), s.Start)
	require.Equal(t, time.Date(2021, 6, 10, 0, 0, 0, 0, time.UTC), s.End)
	require.Len(t, s.Flights, 1)
	require.Equal(t, Doc{
		"ALCD": "LH", "FLNO": "LH724", "MVIN": "D", "STDT": "14NOV20", "EDDT": "14MAR21", "DYOP": "1200560", "SCHT": "1023",
		"FLTY": "P", "FLIN": "I", "ACFT": "747",
		"ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "HKG", "SCAT": "1125", "SCDT": ""}},
		"ERUT": []any{map[string]any{"@RTNO": "1", "APCD": "CTU", "SCAT": "14MAR211023", "SADC": "+1"}},
	}, s.Flights[0])
	require.Empty(t, s.Anomalies)
}

// TestParseSeason_R_C9_InvalidValuesAreReportedNotRejected: the catalogue's
// invalid season values (STDT after EDDT, catalogue §2.13) are kept as sent
// and reported.
func TestParseSeason_R_C9_InvalidValuesAreReportedNotRejected(t *testing.T) {
	t.Parallel()
	bad := strings.NewReplacer("<STDT>14NOV20</STDT>", "<STDT>14NOV21</STDT>", "<SCHT>1023</SCHT>", "<SCHT>2561</SCHT>",
		"<DYOP>1200560</DYOP>", "<DYOP>1200568</DYOP>").Replace(seasonFLTR)
	m := decodeBody(t, "SCHS", "DNLD", seasonBody(seasonHeader, bad))
	s, err := ParseSeason(m.Root.Child("SCHS"))
	require.NoError(t, err)
	require.Equal(t, []string{
		"FLTR 1 (LH724): STDT 14NOV21 is after EDDT 14MAR21",
		"FLTR 1 (LH724): SCHT 2561 is not HHMM",
		"FLTR 1 (LH724): DYOP 1200568 is not a 7-day mask",
	}, s.Anomalies)
	require.Equal(t, "14NOV21", s.Flights[0]["STDT"])
}

// TestParseSeason_R_C9_RejectsWhatCannotReplaceAWindow: a window without its
// identifying header, with unreadable or inverted dates, with a RECS that
// does not match, or with a pattern lacking a required element is refused
// as a whole.
func TestParseSeason_R_C9_RejectsWhatCannotReplaceAWindow(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ body, reason string }{
		"NoName":           {seasonBody(strings.Replace(seasonHeader, "<SNAM>Winter</SNAM>", "", 1), seasonFLTR), "SNAM"},
		"EmptyAirport":     {seasonBody(strings.Replace(seasonHeader, "<APCD>CTU</APCD>", "<APCD/>", 1), seasonFLTR), "APCD"},
		"UnreadableStart":  {seasonBody(strings.Replace(seasonHeader, "10SEP20", "2020-09-10", 1), seasonFLTR), "SDAT"},
		"UnreadableEnd":    {seasonBody(strings.Replace(seasonHeader, "10JUN21", "10XXX21", 1), seasonFLTR), "EDAT"},
		"InvertedWindow":   {seasonBody(strings.Replace(seasonHeader, "10JUN21", "10JUN20", 1), seasonFLTR), "after its end"},
		"RECSMismatch":     {seasonBody(seasonHeader+"<RECS>2</RECS>", seasonFLTR), `RECS "2"`},
		"PatternLacksDYOP": {seasonBody(seasonHeader, strings.Replace(seasonFLTR, "<DYOP>1200560</DYOP>", "", 1)), "DYOP"},
		"PatternEmptyFLNO": {seasonBody(seasonHeader, strings.Replace(seasonFLTR, "<FLNO>LH724</FLNO>", "<FLNO> </FLNO>", 1)), "FLNO"},
		"NoWrapper":        {"", "SCHS element missing"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := decodeBody(t, "SCHS", "DNLD", tc.body)
			_, err := ParseSeason(m.Root.Child("SCHS"))
			var rej *RejectError
			require.True(t, errors.As(err, &rej), "want a RejectError, got %v", err)
			require.Contains(t, rej.Reason, tc.reason)
		})
	}
}

// TestNodeValue_R_C4_FreeTextKeptAsSent: free text (remarks, reasons,
// descriptions) keeps its blanks; codes are trimmed; blank free text is
// still "no text".
func TestNodeValue_R_C4_FreeTextKeptAsSent(t *testing.T) {
	t.Parallel()
	m := decodeBody(t, "SCHD", "DNLD", "<SCHD><RECS>1</RECS><FLTR>"+requiredXML+
		`<REMC>  two leading, one trailing </REMC><STND> 504 </STND><EXSR>   </EXSR>`+
		`<FDIV DDES=" HKG " DDIR="TO">  WX  </FDIV><DELY CODE="RA"> late </DELY><FTSS> DELY </FTSS></FLTR></SCHD>`)
	r, err := FromFLTR(m.Root.Child("SCHD").Child("FLTR"), shanghai(t))
	require.NoError(t, err)
	require.Equal(t, "  two leading, one trailing ", r.Doc["REMC"])
	require.Equal(t, "504", r.Doc["STND"])
	require.NotContains(t, r.Doc, "EXSR", "blank text is no value: the key is absent")
	require.Equal(t, "DELY", r.Doc["FTSS"])
	require.Equal(t, map[string]any{"@DDES": " HKG ", "@DDIR": "TO", "#text": "  WX  "}, r.Doc["FDIV"], "attributes are kept as sent")
	require.Equal(t, []any{map[string]any{"@CODE": "RA", "#text": " late "}}, r.Doc["DELY"])
	for _, name := range []string{"REMC", "DESC", "SARR", "VRMK", "EXSR", "DELY", "FDIV", "FRET", "FLAB"} {
		require.True(t, IsFreeText(name), name)
	}
	for _, name := range []string{"STND", "FTSS", "APPT", "GCOD", "ABCD"} {
		require.False(t, IsFreeText(name), name)
	}

	got, err := ApplyFLOP(Doc{"FLID": "15"}, "REMC", flopRecord(t, "REMC", "<REMC> Bag loading  Delay </REMC>"))
	require.NoError(t, err)
	require.Equal(t, " Bag loading  Delay ", got["REMC"])
	got, err = ApplyFLOP(got, "REMC", flopRecord(t, "REMC", "<REMC>   </REMC>"))
	require.NoError(t, err)
	require.NotContains(t, got, "REMC", "blank free text clears like an empty element")
}
