package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bigSnapshot is an SCHD DNLD of n flights of one operation day
// (2026-03-16), FLIDs from first.
func bigSnapshot(seqn int, first int64, n int) string {
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<MSG>")
	fmt.Fprintf(&sb, "<META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20260315220000</DTTM><TYPE>SCHD</TYPE><STYP>DNLD</STYP></META>", seqn)
	fmt.Fprintf(&sb, "<SCHD><RECS>%d</RECS>", n)
	for i := 0; i < n; i++ {
		mvin := "A"
		if i%2 == 1 {
			mvin = "D"
		}
		fmt.Fprintf(&sb, "<FLTR><FLID>%d</FLID><ALCD>MU</ALCD><FLNO>MU%d</FLNO><MVIN>%s</MVIN><SODT>16MAR26%02d%02d</SODT>"+
			"<FLTY>W</FLTY><FLIN>D</FLIN><ACFT>320</ACFT><STND>S%d</STND><REMC>snapshot flight %d</REMC></FLTR>",
			first+int64(i), 1000+i, mvin, 6+(i/60)%18, i%60, 100+i%40, i)
	}
	sb.WriteString("</SCHD></MSG>")
	return sb.String()
}

// TestSnapshotCrash_R_C6_US07_KilledBetweenBatchesResumesWithoutDoubleBumps
// sends a daily snapshot of 2,000 flights (ten batches of 200), SIGKILLs
// the processor process once some batches are committed, restarts it, and
// checks that the package was finished exactly once: every flight at
// version 1 (nothing bumped twice, INV-13, INV-20b), the message SUCCEEDED
// with one backfill intent and its mailbox row marked only after Redis held
// every flight (INV-8, INV-17b, INV-23), Redis equal to PostgreSQL, and one
// FLIGHT_CREATED event per flight (R-C6, US-07, G-SCHD-SNAPSHOT).
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
func TestSnapshotCrash_R_C6_US07_KilledBetweenBatchesResumesWithoutDoubleBumps(t *testing.T) {
	t.Parallel()
	const (
		n     = 2000
		first = int64(500000)
	)
	s := newStack(t)
	startAll(s)
	w := watchMarkers(s)
	ctx := context.Background()
	id := s.insert(bigSnapshot(710001, first, n))

	flights := func() (int, error) {
		var c int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM flight`).Scan(&c)
		return c, err
	}
	waitFor(t, 90*time.Second, "the first batches committed", func() (bool, error) {
		c, err := flights()
		return c >= 200, err
	})
	s.kill("processor")
	atKill, err := flights()
	require.NoError(t, err)
	require.Less(t, atKill, n, "the kill must happen between batches")
	require.Zero(t, atKill%200, "batches commit whole: %d flights", atKill)
	var state string
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT state FROM proc_state WHERE msg_id=$1`, id).Scan(&state))
	require.Contains(t, []string{"PENDING", "FAILED"}, state, "the message is open between batches")
	var intents int
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE target='mailbox' AND msg_id=$1`, id).Scan(&intents))
	require.Zero(t, intents, "no backfill intent before the whole package")
	t.Logf("killed the processor with %d of %d flights committed", atKill, n)

	s.start("processor")
	waitFor(t, 180*time.Second, "the snapshot's mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	w.finish(t)

	require.Equal(t, map[string]int{"SUCCEEDED": 1}, s.procStates())
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE target='mailbox' AND msg_id=$1`, id).Scan(&intents))
	require.Equal(t, 1, intents, "terminal once")
	var reason string
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT reason FROM proc_state WHERE msg_id=$1`, id).Scan(&reason))
	require.Contains(t, reason, fmt.Sprintf("snapshot: %d records", n))

	pg := s.pgFlights()
	require.Len(t, pg, n)
	for flid, f := range pg {
		require.Equal(t, "ACTIVE", f.State, "flight %d", flid)
		require.Equal(t, int64(1), f.Version, "flight %d bumped more than once", flid)
	}
	var versions int
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE target='flight-state' AND msg_id=$1`, id).Scan(&versions))
	require.Equal(t, n, versions, "one flight-state row per flight")
	waitFor(t, 60*time.Second, "Redis holds every flight", func() (bool, error) {
		return len(s.redisFlights()) == n, nil
	})
	s.requireProjectionEqual()

	events := consumeMsg(t, s, n)
	final := map[int64]int64{}
	for flid := range pg {
		final[flid] = 1
	}
	requireOrdered(t, events, final)
	for flid, evs := range events {
		require.Equal(t, "FLIGHT_CREATED", evs[0].EventType, "flight %d", flid)
	}
}
