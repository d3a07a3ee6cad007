package relay

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/testutil"
)

// censusRow is what a dispatcher recorded on a mailbox_census row.
type censusRow struct {
	State                                                               string
	NextID, RowsFromStart, AfterLastMarked, UnmarkedFrom, UnmarkedBelow *int64
	Error                                                               *string
}

func (b *testBundle) requestCensus(t *testing.T, start int64) int64 {
	t.Helper()
	var id int64
	require.NoError(t, b.pool.QueryRow(t.Context(), `INSERT INTO mailbox_census (start_id, operator, requested_at)
		VALUES (NULLIF($1, 0), 'alice', $2) RETURNING id`, start, testNow).Scan(&id))
	return id
}

func (b *testBundle) census(t *testing.T, id int64) censusRow {
	t.Helper()
	var r censusRow
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT state, next_id, rows_from_start, after_last_marked, unmarked_from_start,
		unmarked_below_start, error FROM mailbox_census WHERE id = $1`, id).
		Scan(&r.State, &r.NextID, &r.RowsFromStart, &r.AfterLastMarked, &r.UnmarkedFrom, &r.UnmarkedBelow, &r.Error))
	return r
}

func (b *testBundle) newCensus(t *testing.T, mailbox *sql.DB) *Census {
	t.Helper()
	c, err := NewCensus(CensusOptions{Logger: b.log, Clock: b.clock, Pool: b.pool, Mailbox: mailbox, Poll: 20 * time.Millisecond})
	require.NoError(t, err)
	return c
}

func ptr(v int64) *int64 { return &v }

// TestCensus_R_L6_R_N9_FiguresUnderTheDispatcherGrants: the cutover's
// five figures, counted by the dispatcher under an account holding exactly
// the grants of deploy/grants/mysql.sql, on a mailbox the predecessor has
// partly marked: rows below and from the start, marked and unmarked, each
// figure exact. Without a start only the two figures that need none are
// set; a mailbox that does not answer makes the census FAILED with the
// error; a census another instance is counting is left to it until its
// claim is stale.
func TestCensus_R_L6_R_N9_FiguresUnderTheDispatcherGrants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := drainCtx(t)
	dsn, _ := b.dispatcherAccounts(t)
	acct, err := mysqlutil.Open(ctx, mysqlutil.Config{DSN: dsn}, airport, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = acct.Close() })
	c := b.newCensus(t, acct)

	marked := testNow.Add(-30 * time.Minute).In(airport).Truncate(time.Second)
	b.insertMailbox(t, marked, "PROCESSED")         // below the start, marked
	b.insertMailbox(t, time.Time{}, "")             // below the start, unmarked
	b.insertMailbox(t, marked, "PROCESSED")         // below the start, marked
	start := b.insertMailbox(t, time.Time{}, "")    // the start, unmarked
	last := b.insertMailbox(t, marked, "PROCESSED") // the last marked row
	b.insertMailbox(t, time.Time{}, "")
	top := b.insertMailbox(t, time.Time{}, "")

	id := b.requestCensus(t, start)
	took, err := c.AnswerOne(ctx)
	require.NoError(t, err)
	require.True(t, took)
	require.Equal(t, censusRow{State: "DONE", NextID: ptr(top + 1), RowsFromStart: ptr(4), AfterLastMarked: ptr(last + 1),
		UnmarkedFrom: ptr(3), UnmarkedBelow: ptr(1)}, b.census(t, id))

	noStart := b.requestCensus(t, 0)
	_, err = c.AnswerOne(ctx)
	require.NoError(t, err)
	require.Equal(t, censusRow{State: "DONE", NextID: ptr(top + 1), AfterLastMarked: ptr(last + 1)}, b.census(t, noStart))
	took, err = c.AnswerOne(ctx)
	require.NoError(t, err)
	require.False(t, took, "nothing is left to count")

	// Another instance took this one just now: it is left to it, until
	// its claim is older than twice the query timeout (its instance died).
	taken := b.requestCensus(t, start)
	b.exec(t, `UPDATE mailbox_census SET started_at = $2 WHERE id = $1`, taken, testNow)
	took, err = c.AnswerOne(ctx)
	require.NoError(t, err)
	require.False(t, took, "a census another instance is counting")
	b.clock.Advance(61 * time.Second)
	took, err = c.AnswerOne(ctx)
	require.NoError(t, err)
	require.True(t, took, "a stale claim is taken again")
	require.Equal(t, "DONE", b.census(t, taken).State)

	// A mailbox that does not answer.
	gone, err := mysqlutil.Open(ctx, mysqlutil.Config{DSN: b.mailboxDSN}, airport, nil)
	require.NoError(t, err)
	require.NoError(t, gone.Close())
	failed := b.requestCensus(t, start)
	took, err = b.newCensus(t, gone).AnswerOne(ctx)
	require.NoError(t, err)
	require.True(t, took)
	row := b.census(t, failed)
	require.Equal(t, "FAILED", row.State)
	require.NotNil(t, row.Error)
	require.Contains(t, *row.Error, "counting the next ID in the mailbox")
	require.Nil(t, row.NextID)
}

// TestCensus_R_L6_TwoInstancesAnswerEachRequestOnce: two dispatcher
// instances' census loops, side by side, answer every request within a few
// poll intervals, and each request exactly once (the claim skips a row the
// other instance holds): each census is counted by one instance's log.
func TestCensus_R_L6_TwoInstancesAnswerEachRequestOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.insertMailbox(t, time.Time{}, "")
	var logs testutil.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for range 2 {
		c, err := NewCensus(CensusOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Clock: b.clock, Pool: b.pool,
			Mailbox: b.mailbox, Poll: 20 * time.Millisecond})
		require.NoError(t, err)
		wg.Go(func() { _ = c.run(ctx) })
	}
	ids := make([]int64, 20)
	for i := range ids {
		ids[i] = b.requestCensus(t, start)
	}
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM mailbox_census WHERE state = 'PENDING'`).Scan(&pending))
		return pending == 0
	}, 10*time.Second, 10*time.Millisecond, "every census answered")
	for _, id := range ids {
		require.Equal(t, censusRow{State: "DONE", NextID: ptr(start + 1), RowsFromStart: ptr(1), AfterLastMarked: ptr(1),
			UnmarkedFrom: ptr(1), UnmarkedBelow: ptr(0)}, b.census(t, id))
	}
	cancel()
	wg.Wait()
	counted := map[int64]int{}
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Msg      string `json:"msg"`
			CensusID int64  `json:"census_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec.Msg == "mailbox census counted" {
			counted[rec.CensusID]++
		}
	}
	for _, id := range ids {
		require.Equal(t, 1, counted[id], "census %d counted once", id)
	}
}
