package decide

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/sistest"
)

// seasonStore is a SeasonView and SeasonSink over one map: what a handler
// reads and what it writes, without a database.
type seasonStore struct {
	windows map[SeasonKey]*SeasonWindow
	writes  []SeasonReplace
}

func (s *seasonStore) SeasonWindow(_ context.Context, key SeasonKey) (*SeasonWindow, error) {
	return s.windows[key], nil
}

func (s *seasonStore) SeasonReplace(_ context.Context, op SeasonReplace) error {
	s.writes = append(s.writes, op)
	id := op.ID
	if id == 0 {
		id = int64(len(s.windows) + 1)
	}
	s.windows[op.Key] = &SeasonWindow{ID: id, Docs: op.Docs}
	return nil
}

func sisMessage(t *testing.T, typ, styp, body string) *sis.Message {
	t.Helper()
	raw := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<MSG>` +
		fmt.Sprintf("<META><SNDR>AODB</SNDR><SEQN>1</SEQN><DTTM>20210123053000</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>", typ, styp) +
		body + "</MSG>"
	msg, err := sis.DecodeText(raw)
	require.NoError(t, err)
	return msg
}

func seasonMessage(t *testing.T, flnos ...string) *sis.Message {
	var pats []string
	for _, f := range flnos {
		pats = append(pats, "<FLTR><ALCD>"+f[:2]+"</ALCD><FLNO>"+f+"</FLNO><MVIN>D</MVIN><STDT>10SEP20</STDT><EDDT>14MAR21</EDDT>"+
			"<DYOP>1234567</DYOP><SCHT>1023</SCHT><FLTY>P</FLTY><FLIN>I</FLIN><ACFT>747</ACFT></FLTR>")
	}
	return sisMessage(t, "SCHS", "DNLD", fmt.Sprintf("<SCHS><SNAM>Winter</SNAM><APCD>CTU</APCD><SDAT>10SEP20</SDAT><EDAT>10JUN21</EDAT><RECS>%d</RECS>%s</SCHS>",
		len(flnos), strings.Join(pats, "")))
}

// TestSeason_R_C9_DecidesFromTheViewAlone: the season handler reads the
// stored window only through its view and writes only through its sink —
// a new window is one replace that creates it, an equal package writes
// nothing, a changed one replaces the stored window by its ID, and an
// unreadable stored document makes the window differ.
func TestSeason_R_C9_DecidesFromTheViewAlone(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2021, 1, 23, 5, 30, 0, 0, time.UTC)
	st := &seasonStore{windows: map[SeasonKey]*SeasonWindow{}}
	key := SeasonKey{SNAM: "Winter", APCD: "CTU", SDAT: "10SEP20", EDAT: "10JUN21"}

	out, err := Season(ctx, st, st, seasonMessage(t, "CA101", "CA102"), 7, now)
	require.NoError(t, err)
	require.Contains(t, out.Note, "2 flights replaced")
	require.Len(t, st.writes, 1)
	require.Equal(t, int64(0), st.writes[0].ID, "a new window is created by the replace")
	require.Equal(t, key, st.writes[0].Key)
	require.Equal(t, int64(7), st.writes[0].MsgID)
	require.Equal(t, now, st.writes[0].Now)
	require.Equal(t, time.Date(2020, 9, 10, 0, 0, 0, 0, time.UTC), st.writes[0].Start)

	out, err = Season(ctx, st, st, seasonMessage(t, "CA101", "CA102"), 8, now)
	require.NoError(t, err)
	require.Contains(t, out.Note, "2 flights unchanged")
	require.Len(t, st.writes, 1, "an equal package writes nothing")

	_, err = Season(ctx, st, st, seasonMessage(t, "CA102"), 9, now)
	require.NoError(t, err)
	require.Len(t, st.writes, 2)
	require.Equal(t, int64(1), st.writes[1].ID, "the stored window is replaced by its ID")
	require.Equal(t, "CA102", st.writes[1].Docs[0].String("FLNO"))

	st.windows[key].Unreadable = true
	_, err = Season(ctx, st, st, seasonMessage(t, "CA102"), 10, now)
	require.NoError(t, err)
	require.Len(t, st.writes, 3, "an unreadable stored document never equals the package")

	_, err = Season(ctx, st, st, sisMessage(t, "SCHS", "DNLD", "<SCHS><SNAM>Winter</SNAM></SCHS>"), 11, now)
	var rej *flight.RejectError
	require.ErrorAs(t, err, &rej, "an invalid package is rejected before anything is read")
	require.Len(t, st.writes, 3)
}

// decideSeason decides the season message raw over st as message id.
func decideSeason(t *testing.T, st *seasonStore, id int64, raw string) (Outcome, error) {
	t.Helper()
	msg, err := sis.DecodeText(raw)
	require.NoError(t, err)
	return Season(context.Background(), st, st, msg, id, time.Date(2021, 1, 23, 5, 30, 0, 0, time.UTC))
}

// TestSeason_R_C9_InvalidValuesAreKeptAndReported: values the catalogue
// calls invalid (STDT after EDDT, catalogue §2.13) do not stop the window
// from being stored; they are named in the reason.
func TestSeason_R_C9_InvalidValuesAreKeptAndReported(t *testing.T) {
	t.Parallel()
	st := &seasonStore{windows: map[SeasonKey]*SeasonWindow{}}
	out, err := decideSeason(t, st, 1, sistest.SCHS(1, "DNLD", "Winter", sistest.SeasonPattern("LH724", "14NOV21")))
	require.NoError(t, err)
	require.Equal(t, "season Winter CTU 10SEP20-10JUN21: 1 flights replaced; kept as sent: FLTR 1 (LH724): STDT 14NOV21 is after EDDT 14MAR21", out.Note)
	require.Len(t, st.writes, 1, "the window is stored")
}

// TestSeason_R_C9_INV19_InvalidPackageLeavesTheWindowUntouched: a package
// that cannot replace its window (a pattern without a required element,
// RECS disagreeing, an inverted window) is DEAD(PROTOCOL) and the stored
// window stays as it was: the handler writes nothing.
//
// Validation 001§6 INV-19 "整包协议拒绝"; 002§8 "整包协议拒绝".
func TestSeason_R_C9_INV19_InvalidPackageLeavesTheWindowUntouched(t *testing.T) {
	t.Parallel()
	schs, pattern := sistest.SCHS, sistest.SeasonPattern
	cases := map[string]struct{ raw, reason string }{
		"PatternWithoutACFT": {schs(2, "DNLD", "Winter", strings.Replace(pattern("MU1", "14NOV20"), "<ACFT>747</ACFT>", "", 1)), "ACFT"},
		"RECSDisagrees":      {strings.Replace(schs(2, "DNLD", "Winter", pattern("MU1", "14NOV20")), "<RECS>1</RECS>", "<RECS>4</RECS>", 1), `RECS "4"`},
		"InvertedWindow":     {strings.Replace(schs(2, "RESP", "Winter", pattern("MU1", "14NOV20")), "<EDAT>10JUN21</EDAT>", "<EDAT>10JUN20</EDAT>", 1), "after its end"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := &seasonStore{windows: map[SeasonKey]*SeasonWindow{}}
			_, err := decideSeason(t, st, 1, schs(1, "DNLD", "Winter", pattern("LH724", "14NOV20")))
			require.NoError(t, err)
			stored := *st.windows[SeasonKey{SNAM: "Winter", APCD: "CTU", SDAT: "10SEP20", EDAT: "10JUN21"}]
			_, err = decideSeason(t, st, 2, tc.raw)
			var rej *flight.RejectError
			require.ErrorAs(t, err, &rej)
			require.Contains(t, rej.Reason, tc.reason)
			require.Len(t, st.writes, 1, "nothing written after the first package")
			require.Equal(t, stored, *st.windows[SeasonKey{SNAM: "Winter", APCD: "CTU", SDAT: "10SEP20", EDAT: "10JUN21"}])
		})
	}
}
