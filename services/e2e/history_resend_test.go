package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEndToEnd_R_L1_SweptFlightSentAgainIsServedWithAHigherVersion: the
// corpus snapshot's flights (operation day long past) are projected, the
// daily history sweep (run-at set to the coming minute) archives them and
// publishes their tombstones, so they leave GET /all/flights; the same
// snapshot sent again (a new SEQN, as the AODB's answer to an RQFD for that
// day would be) brings them back, on GET /all/flights and on msg, one
// version above their tombstone — not at version 1, which the projector's
// version guard and every consumer would drop.
func TestEndToEnd_R_L1_SweptFlightSentAgainIsServedWithAHigherVersion(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	zone, err := time.LoadLocation("Asia/Shanghai") // operation-day.zone's default
	require.NoError(t, err)
	// The sweep runs at the first whole minute at least 40 s away: time for
	// the snapshot to be applied and projected first.
	// A processor that takes long to start on a loaded machine schedules
	// past its run-at (a run-at that passes is not made up): started again
	// with a later one.
	var runAt time.Time
	for attempt := 1; ; attempt++ {
		runAt = time.Now().In(zone).Add(100 * time.Second).Truncate(time.Minute)
		s.start("processor", "-processor.history.run-at="+runAt.Format("15:04"))
		if time.Until(runAt) > 30*time.Second || attempt == 3 {
			break
		}
		s.stop("processor")
	}
	s.start("dispatcher")
	proj := s.start("projector")
	s.start("ingest")

	snapshot := readCorpus(t, "SCHD-DNLD-1.xml")
	s.insert(snapshot)
	waitFor(t, 60*time.Second, "the snapshot's flights projected", func() (bool, error) {
		rd := s.redisFlights()
		return rd[15].Version == 1 && rd[16].Version == 1, nil
	})
	require.True(t, time.Now().Before(runAt), "the snapshot was projected after the sweep's run-at; the test cannot tell the order")

	waitFor(t, time.Until(runAt)+90*time.Second, "the history sweep removed the flights", func() (bool, error) {
		return len(s.pgFlights()) == 0 && len(s.redisFlights()) == 0, nil
	})
	var archived int
	require.NoError(t, s.pg.QueryRow(t.Context(), `SELECT count(*) FROM flight_history WHERE flid IN (15, 16)`).Scan(&archived))
	require.Equal(t, 2, archived)

	s.insert(seqnRe.ReplaceAllString(snapshot, "<SEQN>345936</SEQN>"))
	waitFor(t, 60*time.Second, "the flights sent again projected", func() (bool, error) {
		rd := s.redisFlights()
		return rd[15].Version == 3 && rd[16].Version == 3, nil
	})
	pg := s.pgFlights()
	require.Equal(t, int64(3), pg[15].Version, "created one version above the sweep's tombstone (v2)")
	require.Equal(t, int64(3), pg[16].Version)

	resp, err := http.Get(fmt.Sprintf("http://%s/all/flights", proj.http))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var all struct {
		Count   int `json:"count"`
		Flights []struct {
			FLID         int64 `json:"flid"`
			StateVersion int64 `json:"state_version"`
		} `json:"flights"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&all))
	require.Equal(t, 2, all.Count, "both flights are served again")
	for _, f := range all.Flights {
		require.Equal(t, int64(3), f.StateVersion, "flight %d", f.FLID)
	}

	events := consumeMsg(t, s, 6)
	requireOrdered(t, events, map[int64]int64{15: 3, 16: 3})
	for _, flid := range []int64{15, 16} {
		evs := events[flid]
		require.Len(t, evs, 3, "flight %d: created, swept, created again", flid)
		require.Equal(t, "FLIGHT_DELETED", evs[1].EventType)
		require.Equal(t, "FLIGHT_CREATED", evs[2].EventType)
		require.Equal(t, int64(3), evs[2].StateVersion)
	}
}
