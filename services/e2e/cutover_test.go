package e2e_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// census asks the mailbox's figures as the runbook does (msgxctl mailbox
// census, R-L6): the control plane records the request, a dispatcher
// counts it; it returns the figures once counted.
func (s *stack) census(t *testing.T, start int64) *controlv1.MailboxCensus {
	t.Helper()
	conn, err := grpc.NewClient(s.controlAddr, s.controlCreds())
	require.NoError(t, err)
	defer conn.Close()
	client := controlv1.NewMaintenanceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := client.RequestMailboxCensus(ctx, &controlv1.RequestMailboxCensusRequest{StartId: start, Operator: "cutover-test"})
	require.NoError(t, err)
	c := resp.GetCensus()
	waitFor(t, 30*time.Second, "the mailbox census counted", func() (bool, error) {
		got, err := client.GetMailboxCensus(ctx, &controlv1.GetMailboxCensusRequest{Id: c.GetId()})
		if err != nil {
			return false, err
		}
		c = got.GetCensus()
		return c.GetState() != controlv1.MailboxCensusState_MAILBOX_CENSUS_STATE_PENDING, nil
	})
	require.Equal(t, controlv1.MailboxCensusState_MAILBOX_CENSUS_STATE_DONE, c.GetState(), c.GetError())
	return c
}

// inboxEnd returns the number of records on msgx.inbox.
func (s *stack) inboxEnd(t *testing.T) int64 {
	t.Helper()
	cl, err := kgo.NewClient(s.kafkaOpts()...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, s.kafka.Topics.Inbox)
	require.NoError(t, err)
	o, ok := ends.Lookup(s.kafka.Topics.Inbox, 0)
	require.True(t, ok)
	require.NoError(t, o.Err)
	return o.Offset
}

// predecessor stands for the system msgexchange takes over from: it
// processes a mailbox row and marks it with its own status, never over a
// marker (the adapter's convention). A marker that finds the row marked
// already means two systems marked the row: the test fails.
type predecessor struct {
	t testing.TB
	s *stack
}

// predecessorStatus is the CMINMSGS_STATUS the predecessor's marker writes;
// the gateway writes mailbox.processed-value (PROCESSED).
const predecessorStatus = "DONE"

func (p predecessor) mark(ids ...int64) {
	p.t.Helper()
	for _, id := range ids {
		res, err := p.s.mailbox.Exec(`UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NOW(), CMINMSGS_STATUS = ?
			WHERE CMINMSGS_ID = ? AND CMINMSGS_DATE_PROCESSED IS NULL`, predecessorStatus, id)
		require.NoError(p.t, err)
		n, err := res.RowsAffected()
		require.NoError(p.t, err)
		require.Equal(p.t, int64(1), n, "row %d was marked before the predecessor marked it", id)
	}
}

// markers returns each mailbox row's status from first on, "" for an
// unmarked row.
func (s *stack) markers(first int64) map[int64]string {
	s.t.Helper()
	rows, err := s.mailbox.Query(`SELECT CMINMSGS_ID, IF(CMINMSGS_DATE_PROCESSED IS NULL, '', CMINMSGS_STATUS) FROM CMINMSGS WHERE CMINMSGS_ID >= ?`, first)
	require.NoError(s.t, err)
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var st string
		require.NoError(s.t, rows.Scan(&id, &st))
		out[id] = st
	}
	require.NoError(s.t, rows.Err())
	return out
}

// TestCutover_R_L6_PRE_1_FollowsTheRunbook follows the runbook's "Taking
// over from the predecessor" step by step against real MariaDB and
// PostgreSQL and a mailbox the predecessor has partly marked (PRE-1):
//
//  1. shadow run: ingest.shadow and dispatcher.shadow with start-id S
//     while the predecessor keeps marking — every row from S on is
//     processed, also those the predecessor marked before ingest read them,
//     and nothing is written to the mailbox (no marker, no COUTMSGS) nor
//     left pending (every intent settled shadowed); a restart of ingest
//     publishes only the row that arrived meanwhile, not the run again;
//  2. compare: every mailbox row from S on is registered and terminal,
//     Redis equals PostgreSQL;
//  3. cut: the predecessor stops taking rows; START is the row after the
//     last one it marked;
//  4. switch: start-id START, shadow off — the rows from START on that the
//     gateway processed in shadow are marked now (their shadowed backfills
//     open again), new rows run normally.
//
// At the end no row was marked twice (the predecessor's markers never find
// a marker, the gateway records no already-marked outcome) and none is
// missed: every row below START carries the predecessor's marker, every
// row from START on the gateway's.
func TestCutover_R_L6_PRE_1_FollowsTheRunbook(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pred := predecessor{t: t, s: s}
	ctx := context.Background()
	seqn := 300000
	next := func(flid int64) string {
		seqn++
		return stndMessage(t, flid, seqn)
	}

	// Before the shadow run: the predecessor's history, all but one row
	// marked, and the first row of the shadow run.
	var history []int64
	for range 3 {
		history = append(history, s.insert(next(15)))
	}
	pred.mark(history[:2]...)
	start := s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	pred.mark(start) // marked before the gateway ever runs

	// Step 1: the shadow run.
	shadow := []string{"-ingest.shadow", "-ingest.mailbox.start-id=" + strconv.FormatInt(start, 10), "-dispatcher.shadow"}
	s.start("processor")
	s.start("projector")
	s.start("dispatcher", shadow...)
	s.start("ingest", shadow...)
	pred.mark(history[2]) // the predecessor's own backlog, below S
	shadowRows := []int64{start}
	for i := range 20 {
		id := s.insert(next(15 + int64(i%2)))
		shadowRows = append(shadowRows, id)
		if i%2 == 0 {
			pred.mark(id) // faster than the gateway's scan
		}
	}
	waitFor(t, 90*time.Second, "every row of the shadow run processed, its intent settled", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state p JOIN outbox o ON o.msg_id = p.msg_id AND o.target = 'mailbox'
			WHERE p.msg_id = ANY($1) AND p.state IN ('SUCCEEDED', 'SKIPPED') AND o.state = 'SENT' AND o.outcome = 'shadowed'
			  AND p.backfill_outcome = 'shadowed'`, shadowRows).Scan(&n)
		return n == len(shadowRows), err
	})
	for _, id := range shadowRows[1:] {
		if st := s.markers(id)[id]; st == "" {
			pred.mark(id) // the predecessor catches up
		}
	}

	// A restart in shadow mode resumes where the run stands: the rows the
	// predecessor marked are not published again, the row that arrived
	// meanwhile is, marked or not.
	published := s.inboxEnd(t)
	s.stop("ingest")
	during := s.insert(next(15))
	pred.mark(during)
	shadowRows = append(shadowRows, during)
	s.start("ingest", shadow...)
	waitFor(t, 60*time.Second, "the row that arrived during the restart processed in shadow", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE msg_id = $1 AND backfill_outcome = 'shadowed'`, during).Scan(&n)
		return n == 1, err
	})
	require.Equal(t, published+1, s.inboxEnd(t), "the restart publishes the row that arrived, not the shadow run again")

	// Step 2: compare.
	var registered, pending, below int
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE msg_id >= $1), count(*) FILTER (WHERE msg_id < $1) FROM proc_state`, start).
		Scan(&registered, &below))
	require.Equal(t, len(shadowRows), registered, "every row from S on is processed, marked by the predecessor or not")
	require.Equal(t, int64(registered), s.census(t, start).GetRowsFromStart(), "the runbook's step 2: the mailbox's rows from S on are the registered ones")
	require.Zero(t, below, "no row below S is read")
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'PENDING' AND target IN ('mailbox', 'coutmsgs')`).Scan(&pending))
	require.Zero(t, pending, "shadow mode leaves nothing waiting for a write")
	var coutmsgs int
	require.NoError(t, s.mailbox.QueryRow(`SELECT count(*) FROM COUTMSGS`).Scan(&coutmsgs))
	require.Zero(t, coutmsgs)
	waitFor(t, 30*time.Second, "the projection caught up", func() (bool, error) {
		return len(s.redisFlights()) == 2, nil
	})
	s.requireProjectionEqual()

	// Step 3: the cut. The predecessor takes no new row; the rows it took
	// it marks; the gateway, still in shadow, processes the new ones.
	var cut []int64
	for i := range 6 {
		cut = append(cut, s.insert(next(15+int64(i%2))))
	}
	pred.mark(cut[:2]...) // its last rows
	waitFor(t, 60*time.Second, "the rows after the predecessor's last one processed in shadow", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state WHERE msg_id = ANY($1) AND backfill_outcome = 'shadowed'`, cut).Scan(&n)
		return n == len(cut), err
	})
	startID := s.census(t, 0).GetAfterLastMarked() // the runbook's step 3, asked in shadow mode
	require.Equal(t, cut[2], startID)

	// Step 4: the switch.
	s.stop("ingest")
	s.stop("dispatcher")
	live := []string{"-ingest.mailbox.start-id=" + strconv.FormatInt(startID, 10)}
	s.start("dispatcher")
	s.start("ingest", live...)
	var after []int64
	for i := range 4 {
		after = append(after, s.insert(next(15+int64(i%2))))
	}
	// Marked on the mailbox side and recorded on ours: the dispatcher
	// records a marker's outcome in PostgreSQL after MariaDB took it.
	waitFor(t, 90*time.Second, "every row from START on marked and its marker recorded", func() (bool, error) {
		for _, st := range s.markers(startID) {
			if st == "" {
				return false, nil
			}
		}
		var open int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE target = 'mailbox' AND state = 'PENDING'`).Scan(&open)
		return open == 0, err
	})

	// The runbook's checks of steps 4 and 5: no unmarked row from START on
	// (no live backlog here), none below it (the predecessor finished).
	c := s.census(t, startID)
	require.Zero(t, c.GetUnmarkedFromStart(), "step 4: the backlog from START on is gone")
	require.Zero(t, c.GetUnmarkedBelowStart(), "step 5: the predecessor marked every row below START")
	require.Equal(t, after[len(after)-1]+1, c.GetNextId())

	for id, st := range s.markers(history[0]) {
		if id < startID {
			require.Equal(t, predecessorStatus, st, "row %d below START is the predecessor's", id)
		} else {
			require.Equal(t, "PROCESSED", st, "row %d from START on is the gateway's", id)
		}
	}
	var already, written int
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome = 'already-marked'), count(*) FILTER (WHERE outcome = 'written')
		FROM outbox WHERE target = 'mailbox'`).Scan(&already, &written))
	require.Zero(t, already, "the gateway found no row marked by the predecessor")
	require.Equal(t, len(cut)-2+len(after), written, "one marker per row from START on")
	require.Equal(t, map[string]int{"SUCCEEDED": len(shadowRows) + len(cut) + len(after)}, s.procStates())
	s.requireProjectionEqual()
}
