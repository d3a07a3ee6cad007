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
