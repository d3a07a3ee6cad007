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
