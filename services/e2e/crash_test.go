package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stndMessage is a FLOP STND for flid with a distinct stand per message, so
// every message is one effective change (one version bump).
func stndMessage(t *testing.T, flid int64, seqn int) string {
	base := retarget(readCorpus(t, "FLOP-STND-1.xml"), flid, seqn)
	return strings.Replace(base, "<STND>S209</STND>", fmt.Sprintf("<STND>S%d</STND>", seqn), 1)
}

// TestCrash_ProcessorKilledMidStream kills the processor process with
// SIGKILL while a stream of messages is being processed, restarts it, and
// checks that nothing was lost and nothing applied twice: every row is
// marked, and each flight's version equals 1 + its number of changes
// (R-B2, R-C3, INV-9, INV-13, INV-20b). The processor is held inside a
// batch's writes (a lock on projection_pending) when it is killed, so the
// kill lands mid-stream however fast the processor is (a batched processor
// applies the whole stream between two looks of a polling test).
//
// Validation 001§6 INV-2b "重复扫描、重启恢复"; 002§8 "重复扫描、入队中断".
// Validation 001§6 INV-20b/CLM-3 "失败重处理、重复发现".
func TestCrash_ProcessorKilledMidStream(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	startAll(s)
	w := watchMarkers(s)

	ctx := context.Background()
	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	const perFlight = 60
	const first = 10 // changes per flight before the processor is held
	for i := 0; i < first; i++ {
		s.insert(stndMessage(t, 15, 100000+2*i))
		s.insert(stndMessage(t, 16, 100000+2*i+1))
	}
	total := 1 + 2*perFlight
	waitFor(t, 60*time.Second, "the first messages processed", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE state IN ('APPLIED','SUCCEEDED')`).Scan(&n)
		return n == 1+2*first, err
	})
	// Hold the processor inside its next write of pending projections.
	hold, err := s.pg.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, `LOCK TABLE projection_pending IN SHARE MODE`)
	require.NoError(t, err)
	for i := first; i < perFlight; i++ {
		s.insert(stndMessage(t, 15, 100000+2*i))
		s.insert(stndMessage(t, 16, 100000+2*i+1))
	}
	waitFor(t, 60*time.Second, "the processor held inside a batch", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO projection_pending%'`).Scan(&n)
		return n > 0, err
	})

	// Kill mid-stream, then restart.
	s.kill("processor")
	require.NoError(t, hold.Rollback(ctx))
	var before int
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE state IN ('APPLIED','SUCCEEDED')`).Scan(&before))
	require.Less(t, before, total, "the kill must happen mid-stream")
	s.start("processor")

	waitFor(t, 120*time.Second, "every mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	w.finish(t)
	require.Equal(t, map[string]int{"SUCCEEDED": total}, s.procStates())

	pg := s.pgFlights()
	require.Equal(t, int64(1+perFlight), pg[15].Version, "flight 15: one version per change, none twice")
	require.Equal(t, int64(1+perFlight), pg[16].Version, "flight 16: one version per change, none twice")
	require.Equal(t, fmt.Sprintf("S%d", 100000+2*(perFlight-1)), pg[15].Doc["STND"], "the last message wins")

	waitFor(t, 30*time.Second, "Redis caught up", func() (bool, error) {
		rd := s.redisFlights()
		return rd[15].Version == 1+perFlight && rd[16].Version == 1+perFlight, nil
	})
	s.requireProjectionEqual()
	events := consumeMsg(t, s, 2*(1+perFlight))
	requireOrdered(t, events, map[int64]int64{15: 1 + perFlight, 16: 1 + perFlight})
}
