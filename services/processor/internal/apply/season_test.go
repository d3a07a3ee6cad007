package apply

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/flight"
	"msgexchange/services/processor/internal/decide"
)

// pattern is a season pattern document of flno.
func pattern(flno string) flight.Doc {
	return flight.Doc{"ALCD": flno[:2], "FLNO": flno, "MVIN": "A", "ROUT": []any{map[string]any{"@RTNO": "1", "APCD": "HKG"}}}
}

// TestSeason_R_C9_ReplacesTheWindowsPatternsInOrder: a season package
// creates its window when it is new, then stores its patterns as their
// own documents in the package's order with their count and message; a
// later package of the window replaces them all; another window and the
// daily flight state are not touched (R-C9).
func TestSeason_R_C9_ReplacesTheWindowsPatternsInOrder(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	winter := decide.SeasonKey{SNAM: "Winter" + formatID(base), APCD: "CTU", SDAT: "10SEP20", EDAT: "10JUN21"}
	summer := winter
	summer.SNAM = "Summer" + formatID(base)
	start, end := time.Date(2020, 9, 10, 0, 0, 0, 0, time.UTC), time.Date(2021, 6, 10, 0, 0, 0, 0, time.UTC)
	v, s := TxView{Tx: tx}, TxSink{Tx: tx}
	replace := func(id int64, key decide.SeasonKey, msg int64, flnos ...string) {
		t.Helper()
		docs := make([]flight.Doc, len(flnos))
		for i, f := range flnos {
			docs[i] = pattern(f)
		}
		require.NoError(t, s.SeasonReplace(ctx, decide.SeasonReplace{ID: id, Key: key, Start: start, End: end, Docs: docs, MsgID: msg, Now: t0}))
	}
	type window struct {
		Flights   int
		LastMsgID int64
		FLNOs     []string
	}
	read := func(key decide.SeasonKey) window {
		t.Helper()
		var w window
		var from, to time.Time
		require.NoError(t, tx.QueryRow(ctx, `
			SELECT s.flights, s.last_msg_id, s.start_date, s.end_date,
				COALESCE((SELECT array_agg(f.alcd || ' ' || f.flno || ' ' || f.mvin ORDER BY f.seq) FROM season_flight f WHERE f.season_id=s.id), '{}')
			FROM season_schedule s WHERE snam=$1 AND apcd=$2 AND sdat=$3 AND edat=$4`, key.SNAM, key.APCD, key.SDAT, key.EDAT).
			Scan(&w.Flights, &w.LastMsgID, &from, &to, &w.FLNOs))
		require.True(t, from.Equal(start) && to.Equal(end), "dates %s..%s", from, to)
		return w
	}

	got, err := v.SeasonWindow(ctx, winter)
	require.NoError(t, err)
	require.Nil(t, got, "a new window")
	replace(0, winter, base+1, "LH724", "CA002")
	replace(0, summer, base+2, "MU001")
	require.Equal(t, window{2, base + 1, []string{"LH LH724 A", "CA CA002 A"}}, read(winter))

	got, err = v.SeasonWindow(ctx, winter)
	require.NoError(t, err)
	require.NotZero(t, got.ID)
	require.False(t, got.Unreadable)
	require.Equal(t, []flight.Doc{pattern("LH724"), pattern("CA002")}, got.Docs, "lossless, in the package's order")

	replace(got.ID, winter, base+3, "MU123")
	require.Equal(t, window{1, base + 3, []string{"MU MU123 A"}}, read(winter))
	require.Equal(t, window{1, base + 2, []string{"MU MU001 A"}}, read(summer))
	replace(got.ID, winter, base+4)
	require.Equal(t, window{0, base + 4, []string{}}, read(winter), "an empty package empties its window")
	require.Zero(t, count(t, tx, `SELECT count(*) FROM flight WHERE last_msg_id BETWEEN $1 AND $2`, base, base+999))
	require.Zero(t, count(t, tx, `SELECT count(*) FROM outbox WHERE msg_id BETWEEN $1 AND $2`, base, base+999))
}

// TestSeason_R_C9_UnreadableStoredPatternEqualsNoPackage: a stored window
// whose pattern cannot be read as a document is reported unreadable, so
// the next package of the window replaces it instead of comparing equal
// to what could be read (R-C9).
func TestSeason_R_C9_UnreadableStoredPatternEqualsNoPackage(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	key := decide.SeasonKey{SNAM: "Winter" + formatID(base), APCD: "CTU", SDAT: "10SEP20", EDAT: "10JUN21"}
	var id int64
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO season_schedule (snam, apcd, sdat, edat, start_date, end_date, flights, last_msg_id, updated_at)
		VALUES ($1, $2, $3, $4, '2020-09-10', '2021-06-10', 2, 1, $5) RETURNING id`, key.SNAM, key.APCD, key.SDAT, key.EDAT, t0).Scan(&id))
	exec(t, tx, `INSERT INTO season_flight (season_id, seq, alcd, flno, mvin, doc) VALUES ($1, 1, 'LH', 'LH724', 'A', $2), ($1, 2, 'CA', 'CA002', 'A', '"CA002"')`,
		id, pattern("LH724").Canonical())
	got, err := TxView{Tx: tx}.SeasonWindow(ctx, key)
	require.NoError(t, err)
	require.Equal(t, id, got.ID)
	require.True(t, got.Unreadable)
	require.Equal(t, pattern("LH724"), got.Docs[0])
}
