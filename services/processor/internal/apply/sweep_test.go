package apply

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"msgexchange/services/processor/internal/decide"
)

// sweepDay is the operation day of the flights the sweep's test commits,
// a day no other test of the package reads: every other test's rows stay
// in its own transaction.
var sweepDay = time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC)

// TestSweep_R_C11_INV18_HeldRowsAreReportedWithoutWaiting: the sweep locks
// a due flight and its code-share master without waiting: a row a
// processing transaction holds is reported held, at once, and taken once
// it is free; a flight not due yet or gone, and a master gone, are
// neither (R-C11, INV-18).
func TestSweep_R_C11_INV18_HeldRowsAreReportedWithoutWaiting(t *testing.T) {
	t.Parallel()
	// A lock that is waited for fails the test at this deadline instead of
	// holding it until the package's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	base := fresh()
	child, master := base+10, base+11
	commit(t, `INSERT INTO flight (flid, operation_day, state, state_version, master_flid, last_msg_id, doc)
		VALUES ($1, $3, 'ACTIVE', 2, $2, 7, '{}'), ($2, $3, 'ACTIVE', 5, NULL, 8, '{"FLNO": "YG1"}')`,
		`DELETE FROM flight WHERE flid IN ($1, $2) AND operation_day = $3`, child, master, sweepDay)
	holder := begin(t)
	exec(t, holder, `SELECT 1 FROM flight WHERE flid IN ($1, $2) FOR UPDATE`, child, master)
	s := Sweep{Tx: begin(t)}
	cutoff := sweepDay.AddDate(0, 0, 1)

	f, held, err := s.Due(ctx, child, cutoff)
	require.NoError(t, err)
	require.True(t, held)
	require.Nil(t, f)
	f, held, err = s.Master(ctx, master)
	require.NoError(t, err)
	require.True(t, held)
	require.Nil(t, f)

	require.NoError(t, holder.Rollback(ctx))
	f, held, err = s.Due(ctx, child, sweepDay)
	require.NoError(t, err)
	require.False(t, held)
	require.Nil(t, f, "not due before its cutoff")
	f, held, err = s.Due(ctx, child, cutoff)
	require.NoError(t, err)
	require.False(t, held)
	require.Equal(t, &decide.Flight{FLID: child, State: "ACTIVE", Version: 2, OpDay: f.OpDay, Master: &master}, f)
	require.True(t, f.OpDay.Equal(sweepDay))
	f, held, err = s.Master(ctx, master)
	require.NoError(t, err)
	require.False(t, held)
	require.Equal(t, int64(5), f.Version)
	require.Equal(t, int64(8), f.LastMsgID, "a master's rewrite names its last message")
	require.Equal(t, "YG1", f.Doc.String("FLNO"))

	for _, gone := range []func() (*decide.Flight, bool, error){
		func() (*decide.Flight, bool, error) { return s.Due(ctx, base+99, cutoff) },
		func() (*decide.Flight, bool, error) { return s.Master(ctx, base+99) },
	} {
		f, held, err = gone()
		require.NoError(t, err)
		require.False(t, held)
		require.Nil(t, f)
	}
}

// historyRow is a flight_history row as these tests check it.
type historyRow struct {
	flightRow
	Archived time.Time
}

// readHistory lists flid's history rows by version.
func readHistory(t *testing.T, tx pgx.Tx, flid int64) []historyRow {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT state, state_version, last_msg_id, operation_day, master_flid, doc, created_at, updated_at, archived_at
		FROM flight_history WHERE flid=$1 ORDER BY state_version`, flid)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (historyRow, error) {
		var h historyRow
		var doc []byte
		if err := r.Scan(&h.State, &h.Version, &h.LastMsgID, &h.OpDay, &h.Master, &doc, &h.Created, &h.Updated, &h.Archived); err != nil {
			return h, err
		}
		h.Created, h.Updated, h.Archived = h.Created.UTC(), h.Updated.UTC(), h.Archived.UTC()
		return h, json.Unmarshal(doc, &h.Doc)
	})
	require.NoError(t, err)
	return out
}

// TestSweep_R_C11_INV28_ArchivesBeforeRemovingWithOneTombstone: a purged
// flight is copied to the history as it was stored, then its deletion's
// outbox rows — caused by no message, so without msg_id — are written, and
// only then is the live row removed; a version already archived is not
// archived again, and a flight already DELETED gets no tombstone (R-C11,
// INV-28).
func TestSweep_R_C11_INV28_ArchivesBeforeRemovingWithOneTombstone(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	active, deleted, master := base+10, base+11, base+12
	addFlight(t, tx, active, "ACTIVE", 3, master, base+1, doc(active, "STND", "3"))
	addFlight(t, tx, deleted, "DELETED", 2, 0, base+2, doc(deleted))
	addHistory(t, tx, deleted, "DELETED", 2)
	s, at := Sweep{Tx: tx}, t0.Add(time.Hour)
	stored := readFlight(t, tx, active)

	require.NoError(t, s.Archive(ctx, active, remove(0, active, 4, at), at))
	require.Equal(t, []historyRow{{flightRow: stored, Archived: at}}, readHistory(t, tx, active), "archived as stored")
	rows := outboxOf(t, tx, active)
	require.Equal(t, []string{"flight-state", "msg", "schd"}, targets(rows))
	require.JSONEq(t, `{"msgx-version": "4"}`, rows[0].Headers)
	for _, o := range rows {
		require.Nil(t, o.MsgID, "caused by no message")
		require.True(t, o.Due.Equal(at))
	}
	require.Empty(t, rows[0].Payload, "tombstone")

	require.NoError(t, s.Archive(ctx, deleted, nil, at))
	h := readHistory(t, tx, deleted)
	require.Len(t, h, 1)
	require.True(t, h[0].Archived.Equal(t0.Add(-time.Hour)), "the version archived first is kept: %s", h[0].Archived)
	require.Empty(t, outboxOf(t, tx, deleted))
	require.Zero(t, count(t, tx, `SELECT count(*) FROM flight WHERE flid IN ($1, $2)`, active, deleted), "removed from the live rows")
}

// TestSweep_R_C8_INV22_MasterRewriteKeepsItsLastMessage: the sweep's
// rewrite of a code-share master that lost a purged child stores its new
// version and document with their outbox rows, without msg_id, and leaves
// the master's last message as it was: no message caused the change
// (R-C8, INV-22).
func TestSweep_R_C8_INV22_MasterRewriteKeepsItsLastMessage(t *testing.T) {
	t.Parallel()
	ctx, tx, base := setup(t, 0)
	master := base + 10
	addFlight(t, tx, master, "ACTIVE", 2, 0, base+5, doc(master, "MAFL", "YG11"))
	at := t0.Add(time.Hour)
	rewrite := put(0, master, 3, doc(master), at)

	require.NoError(t, Sweep{Tx: tx}.Change(ctx, rewrite))
	f := readFlight(t, tx, master)
	require.Equal(t, int64(3), f.Version)
	require.Equal(t, map[string]any(doc(master)), f.Doc)
	require.Equal(t, base+5, f.LastMsgID)
	require.True(t, f.Updated.Equal(at))
	rows := outboxOf(t, tx, master)
	require.Equal(t, []string{"flight-state", "msg", "schd"}, targets(rows))
	for _, o := range rows {
		require.Nil(t, o.MsgID)
	}
	require.Empty(t, pending(t, tx, 0), "no projection waits for a change no message caused")
}
