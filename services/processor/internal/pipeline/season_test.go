package pipeline

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/processor/internal/sistest"
)

var (
	seasonPattern = sistest.SeasonPattern
	schs          = sistest.SCHS
)

type seasonRow struct {
	SNAM, SDAT, EDAT string
	Flights          int
	LastMsgID        int64
	FLNOs            []string
}

func (h *harness) seasons() []seasonRow {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `
		SELECT s.snam, s.sdat, s.edat, s.flights, s.last_msg_id,
			COALESCE((SELECT array_agg(f.flno ORDER BY f.seq) FROM season_flight f WHERE f.season_id=s.id), '{}')
		FROM season_schedule s ORDER BY s.snam`)
	require.NoError(h.t, err)
	defer rows.Close()
	var out []seasonRow
	for rows.Next() {
		var r seasonRow
		require.NoError(h.t, rows.Scan(&r.SNAM, &r.SDAT, &r.EDAT, &r.Flights, &r.LastMsgID, &r.FLNOs))
		out = append(out, r)
	}
	require.NoError(h.t, rows.Err())
	return out
}

// TestSeason_R_C9_ReplacesItsWindowAndNeverTouchesFlights: SCHS DNLD and
// RESP store the window's patterns as their own document set, replace them
// as a whole per window, leave other windows alone, write nothing when the
// content is unchanged, and never touch flights, events or projections.
func TestSeason_R_C9_ReplacesItsWindowAndNeverTouchesFlights(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(1, schd(1, "DNLD", fltr(15, day23)))
	flights := h.count(`SELECT count(*) FROM outbox WHERE target <> 'mailbox'`)

	h.run(2, schs(2, "DNLD", "Winter", seasonPattern("LH724", "14NOV20"), seasonPattern("CA002", "11OCT20")))
	r := h.proc(2)
	require.Equal(t, StateSucceeded, r.State, r.Reason)
	require.Equal(t, "season Winter CTU 10SEP20-10JUN21: 2 flights replaced", r.Reason)
	require.Equal(t, []seasonRow{{SNAM: "Winter", SDAT: "10SEP20", EDAT: "10JUN21", Flights: 2, LastMsgID: 2, FLNOs: []string{"LH724", "CA002"}}}, h.seasons())
	var doc map[string]any
	var raw []byte
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT doc FROM season_flight WHERE flno='LH724'`).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, []any{map[string]any{"@RTNO": "1", "APCD": "HKG", "SCAT": "1125"}}, doc["ROUT"], "the season document is lossless")

	h.run(3, schs(3, "RESP", "Winter", seasonPattern("MU123", "14NOV20")))
	h.run(4, schs(4, "DNLD", "Summer", seasonPattern("LH724", "14NOV20")))
	require.Equal(t, []seasonRow{
		{SNAM: "Summer", SDAT: "10SEP20", EDAT: "10JUN21", Flights: 1, LastMsgID: 4, FLNOs: []string{"LH724"}},
		{SNAM: "Winter", SDAT: "10SEP20", EDAT: "10JUN21", Flights: 1, LastMsgID: 3, FLNOs: []string{"MU123"}},
	}, h.seasons())

	h.run(5, schs(5, "DNLD", "Winter", seasonPattern("MU123", "14NOV20")))
	require.Equal(t, "season Winter CTU 10SEP20-10JUN21: 1 flights unchanged", h.proc(5).Reason)
	require.Equal(t, int64(3), h.seasons()[1].LastMsgID, "an unchanged window is not rewritten")

	// An empty season (RECS 0) empties its window.
	h.run(6, schs(6, "DNLD", "Summer"))
	require.Equal(t, StateSucceeded, h.state(6))
	require.Equal(t, 0, h.seasons()[0].Flights)

	require.Equal(t, flights, h.count(`SELECT count(*) FROM outbox WHERE target <> 'mailbox'`), "no flight event")
	require.Equal(t, int64(1), h.flight(15).Version)
	require.Zero(t, h.count(`SELECT count(*) FROM projection_pending WHERE msg_id >= 2`))
}
