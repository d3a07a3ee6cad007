package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMarker_R_A5_INV8_MarkerTheMailboxLostIsWrittenAgain: a mailbox row
// whose marker msgexchange wrote comes back unmarked — the mailbox's
// database restored from a backup, or failed over to a replica that had
// not received the marker — and is marked again, without the message
// running again. Before, ingest republished the row every republish-after
// and the processor ignored it as a republish: the row stayed unmarked for
// good.
func TestMarker_R_A5_INV8_MarkerTheMailboxLostIsWrittenAgain(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start("processor")
	s.start("dispatcher")
	s.start("projector")
	s.start("ingest", "-ingest.pipeline.full-rescan-interval=1s", "-ingest.pipeline.republish-after=2s")

	ids := []int64{s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))}
	ids = append(ids, s.insert(retarget(readCorpus(t, "FLOP-STND-1.xml"), 15, 910001)))
	ids = append(ids, s.insert(retarget(readCorpus(t, "FLOP-REMC-1.xml"), 16, 910002)))
	waitFor(t, 90*time.Second, "every mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lost := ids[1]
	var applied time.Time
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT applied_at FROM proc_state WHERE msg_id = $1`, lost).Scan(&applied))
	version := s.pgFlights()[15].Version

	// The row as it was before the marker: no processed date, its status
	// as the AODB wrote it (the marker rewrites both).
	_, err := s.mailbox.ExecContext(ctx, `UPDATE CMINMSGS SET CMINMSGS_DATE_PROCESSED = NULL, CMINMSGS_STATUS = 'VALID' WHERE CMINMSGS_ID = ?`, lost)
	require.NoError(t, err)
	waitFor(t, 60*time.Second, "the row whose marker the mailbox lost marked again", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})

	var again time.Time
	var intents int
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT applied_at, (SELECT count(*) FROM outbox WHERE msg_id = $1 AND target = 'mailbox')
		FROM proc_state WHERE msg_id = $1`, lost).Scan(&again, &intents))
	require.True(t, applied.Equal(again), "the message did not run again")
	require.Equal(t, 2, intents, "one marker intent more")
	require.Equal(t, version, s.pgFlights()[15].Version, "no new version")
}

// TestMarker_R_L5_R_M1_MailboxFailoverHandsALostIDOutAgain: the mailbox's
// database fails over to a replica that lacked its newest row, one
// msgexchange had already read and applied but not yet marked, and
// AUTO_INCREMENT hands that row's ID out again to the next message the
// AODB inserts. The marker of the applied message must not land on the new
// row — that would tell the mailbox that a message nobody processed was
// processed — and the new message must not be dropped: its row stays
// unmarked, ingest republishes it, and the processor holds it as a reused
// ID for an operator (R-L5) without running it. The intent is abandoned
// with outcome row-replaced.
//
// The test holds the row's lock from its insert on, so that the
// dispatcher's marker of it waits, as a marker waits for a mailbox that is
// failing over; under that lock the row is replaced as the failover
// replaces it, and the marker reads the new row once the lock is gone.
func TestMarker_R_L5_R_M1_MailboxFailoverHandsALostIDOutAgain(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.start("processor")
	s.start("projector")
	s.start("dispatcher")
	s.start("ingest", "-ingest.pipeline.full-rescan-interval=1s", "-ingest.pipeline.republish-after=2s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	waitFor(t, 90*time.Second, "every mailbox row marked", func() (bool, error) {
		n, err := s.unmarked()
		return n == 0, err
	})
	lost := s.insert(retarget(readCorpus(t, "FLOP-STND-1.xml"), 15, 910001))
	failover, err := s.mailbox.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = failover.Rollback() }()
	var received time.Time
	var processed *time.Time
	require.NoError(t, failover.QueryRowContext(ctx, `SELECT CMINMSGS_DATE_RECEIVED, CMINMSGS_DATE_PROCESSED FROM CMINMSGS WHERE CMINMSGS_ID = ? FOR UPDATE`, lost).
		Scan(&received, &processed))
	require.Nil(t, processed, "the row is locked before its marker")
	waitFor(t, 90*time.Second, "the message of the row the failover loses finished, its marker waiting", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM proc_state p JOIN outbox o ON o.msg_id = p.msg_id AND o.target = 'mailbox'
			WHERE p.msg_id = $1 AND p.state = 'SUCCEEDED'`, lost).Scan(&n)
		return n == 1, err
	})
	version := s.pgFlights()[15].Version

	// The failover: the new primary never had the row, and its
	// AUTO_INCREMENT hands the ID to the next message, received later.
	next := retarget(readCorpus(t, "FLOP-REMC-1.xml"), 15, 910002)
	_, err = failover.ExecContext(ctx, `DELETE FROM CMINMSGS WHERE CMINMSGS_ID = ?`, lost)
	require.NoError(t, err)
	_, err = failover.ExecContext(ctx, `INSERT INTO CMINMSGS (CMINMSGS_ID, CMINMSGS_CLOB_MSG, CMINMSGS_DATE_RECEIVED, CMINMSGS_STATUS) VALUES (?, ?, ?, 'VALID')`,
		lost, next, received.Add(9*time.Second))
	require.NoError(t, err)
	require.NoError(t, failover.Commit())

	var outcome string
	waitFor(t, 60*time.Second, "the marker intent of the lost row settled", func() (bool, error) {
		var state string
		err := s.pg.QueryRow(ctx, `SELECT state, COALESCE(outcome, '') FROM outbox WHERE msg_id = $1 AND target = 'mailbox'`, lost).Scan(&state, &outcome)
		return err == nil && state != "PENDING", err
	})
	require.Equal(t, "row-replaced", outcome, "the marker is not written onto another message's row")
	waitFor(t, 60*time.Second, "the reissued row's text held as a reused ID", func() (bool, error) {
		var n int
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM mailbox_reuse WHERE msg_id = $1`, lost).Scan(&n)
		return n == 1, err
	})
	require.NoError(t, s.mailbox.QueryRowContext(ctx, `SELECT CMINMSGS_DATE_PROCESSED FROM CMINMSGS WHERE CMINMSGS_ID = ?`, lost).Scan(&processed))
	require.Nil(t, processed, "the message under the reissued ID ran nowhere: its row stays unmarked")
	require.Equal(t, version, s.pgFlights()[15].Version, "the held message is not applied")
}
