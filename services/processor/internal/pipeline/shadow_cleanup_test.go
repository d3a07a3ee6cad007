package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgexchange/services/internal/procstate"
)

// settleShadowed settles every pending intent as the dispatcher does: a
// mailbox intent in shadow mode (outcome shadowed, backfill finished
// shadowed) unless the message is one of written, whose marker was
// written; every other row delivered.
func (h *harness) settleShadowed(written ...int64) {
	h.t.Helper()
	now := h.clk.Now()
	h.exec(`UPDATE outbox SET state='SENT', sent_at=$1,
		outcome=CASE WHEN target <> 'mailbox' THEN outcome WHEN msg_id = ANY($2) THEN 'written' ELSE 'shadowed' END
		WHERE state='PENDING'`, now, written)
	h.exec(`UPDATE proc_state SET backfilled_at=$1, backfill_outcome=CASE WHEN msg_id = ANY($2) THEN 'written' ELSE 'shadowed' END
		WHERE backfilled_at IS NULL AND finished_at IS NOT NULL`, now, written)
}

// cleanAfterRetention moves the clock past the record retention and runs
// the record cleanup.
func (h *harness) cleanAfterRetention() CleanupResult {
	h.t.Helper()
	h.clk.Advance(DefaultRecordRetention + day)
	res, err := h.e.RunCleanup(context.Background())
	require.NoError(h.t, err)
	return res
}

// TestShadow_R_L6_RepublishAfterRetentionCleanupIsNotExecutedAgain: a
// mailbox row processed in shadow mode whose record the cleanup deleted
// at its retention (30 days) — its row left unmarked by the predecessor,
// or a row of the cutover's START on — is published again by ingest (a
// republish, a restart, the switch to live). Registration must not take
// it for a new message: executed again, its stale content would overwrite
// what later messages wrote. It is finished SKIPPED at once, with its
// marker intent so that the gateway marks the row once it is live, and
// this holds again after its own record is cleaned up. A row after the
// cleaned range, and a cleaned record whose marker was written (its row
// is marked; ingest never publishes it again), are outside the range.
func TestShadow_R_L6_RepublishAfterRetentionCleanupIsNotExecutedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, maintenanceOptions)
	first := refMsg(7, "GLST", "ADD", glst("G1", "first"))
	h.run(6, refMsg(6, "GLST", "ADD", glst("G6", "marked")))
	h.run(7, first)
	h.run(8, refMsg(8, "GLST", "UPD", glst("G1", "second")))
	h.settleShadowed(6)

	res := h.cleanAfterRetention()
	require.Equal(t, int64(3), res.Records, "shadowed records are cleaned up at their retention like any other")
	var lo, hi, records int64
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT min_msg_id, max_msg_id, records FROM shadow_cleanup`).Scan(&lo, &hi, &records))
	require.Equal(t, []int64{7, 8, 2}, []int64{lo, hi, records}, "the range of the cleaned shadowed records")

	h.insert(7, first) // the row is still unmarked: published again
	h.drain()
	require.Equal(t, "second", h.ref("GLST", "G1")["GTNM"], "the stale message is not applied over the later one")
	p := h.proc(7)
	require.Equal(t, StateSkipped, p.State, "a republished row whose record was cleaned up is no new message")
	require.Equal(t, procstate.CleanedRepublishReason, p.Reason)
	require.Zero(t, p.Attempts, "never executed")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM outbox WHERE target='mailbox' AND state='PENDING' AND msg_id=7`),
		"its marker intent: the gateway marks the row once live, shadow mode settles it")

	// Its own record is cleaned up in turn, and the row comes again.
	h.settleShadowed()
	require.Equal(t, int64(1), h.cleanAfterRetention().Records)
	h.insert(7, first)
	h.drain()
	require.Equal(t, StateSkipped, h.state(7))
	require.Equal(t, "second", h.ref("GLST", "G1")["GTNM"])

	// Outside the range: a new row runs as usual.
	h.run(9, refMsg(9, "GLST", "UPD", glst("G1", "third")))
	require.Equal(t, StateSucceeded, h.state(9))
	require.Equal(t, "third", h.ref("GLST", "G1")["GTNM"])
	require.Equal(t, []int64{7, 9}, h.ids(`SELECT msg_id FROM proc_state ORDER BY msg_id`))
}

// TestShadow_R_L6_CleanupWaitsForARegistrationInFlight: the record cleanup
// and registration are serialised by the cleanup lock, so a registration
// can never read the cleaned range from before a cleanup batch and then
// find the record that batch deleted gone — it would register the ID as a
// new message. A cleanup batch waits for the registration holding the lock
// and runs once it committed; a registration waits for a cleanup batch in
// flight and then finds the record gone and the ID in the cleaned range.
func TestShadow_R_L6_CleanupWaitsForARegistrationInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, maintenanceOptions)
	h.run(7, refMsg(7, "GLST", "ADD", glst("G1", "first")))
	h.settleShadowed()
	h.clk.Advance(DefaultRecordRetention + day)

	ctx := context.Background()
	tx, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, cleanupLockShared, cleanupLockKey) // as a registration's first statement
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := h.e.RunCleanup(ctx)
		done <- err
	}()
	require.Eventually(t, func() bool { return h.count(waitingForLocks) == 1 }, 20*time.Second, 10*time.Millisecond,
		"the cleanup waits for the registration's lock")
	select {
	case err := <-done:
		t.Fatalf("the cleanup ran while a registration held the cleanup lock (err %v)", err)
	default:
	}
	require.Equal(t, 1, h.count(`SELECT count(*) FROM proc_state WHERE msg_id=7`))

	require.NoError(t, tx.Commit(ctx))
	awaitDone(t, done, "the cleanup did not run after the registration committed")
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE msg_id=7`))

	// The other way round: a cleanup batch in flight holds the lock.
	h.run(8, refMsg(8, "GLST", "ADD", glst("G8", "eight")))
	h.settleShadowed()
	h.clk.Advance(DefaultRecordRetention + day)
	cleanup, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = cleanup.Rollback(ctx) }()
	_, err = cleanup.Exec(ctx, cleanupLockExclusive, cleanupLockKey)
	require.NoError(t, err)
	_, err = cleanup.Exec(ctx, `DELETE FROM proc_state WHERE msg_id = 8`) // as the batch deletes it,
	require.NoError(t, err)
	_, err = cleanup.Exec(ctx, `INSERT INTO shadow_cleanup AS s (id, min_msg_id, max_msg_id, records, updated_at) VALUES (1, 8, 8, 1, now())
		ON CONFLICT (id) DO UPDATE SET max_msg_id = 8`) // and widens the range
	require.NoError(t, err)
	go func() {
		done <- h.e.register(ctx, inboxTopic, []*kgo.Record{{Topic: inboxTopic, Key: []byte("8"), Value: []byte(refMsg(8, "GLST", "ADD", glst("G8", "eight"))), Offset: 100}})
	}()
	require.Eventually(t, func() bool { return h.count(waitingForLocks) == 1 }, 20*time.Second, 10*time.Millisecond,
		"the registration waits for the cleanup in flight")
	require.NoError(t, cleanup.Commit(ctx))
	awaitDone(t, done, "the registration did not run after the cleanup committed")
	require.Equal(t, StateSkipped, h.state(8), "registered after the cleanup: the ID is in the cleaned range")
}

// waitingForLocks counts the sessions of the test's database waiting for
// a lock: an advisory lock, or a row another transaction deletes.
const waitingForLocks = `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`

// awaitDone waits for the error of a call running in the background.
// cleanupDuringRegistration finishes messages 7, 8 and 9 (reference data),
// settles their markers — written for the IDs in written, shadowed for the
// others —, moves the clock past the record retention, and starts the
// record cleanup while a registration holds the cleanup lock shared. It
// returns the registration's transaction (rolled back when the test
// ends) and the cleanup's outcome.
func cleanupDuringRegistration(h *harness, written ...int64) (pgx.Tx, <-chan error) {
	h.t.Helper()
	h.run(7, refMsg(7, "GLST", "ADD", glst("G1", "first")))
	h.run(8, refMsg(8, "GLST", "ADD", glst("G2", "second")))
	h.run(9, refMsg(9, "GLST", "ADD", glst("G3", "third")))
	h.settleShadowed(written...)
	h.clk.Advance(DefaultRecordRetention + day)

	ctx := context.Background()
	tx, err := h.pool.Begin(ctx)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, cleanupLockShared, cleanupLockKey) // a registration in flight
	require.NoError(h.t, err)

	done := make(chan error, 1)
	go func() {
		_, err := h.e.RunCleanup(ctx)
		done <- err
	}()
	return tx, done
}

func awaitDone(t *testing.T, done <-chan error, msg string) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal(msg)
	}
}

// TestCleanup_R_M5_R_L6_OnlyShadowedRecordsWaitForRegistration: the
// cleanup deletes records whose markers the dispatcher wrote without the
// cleanup lock, so registration — which holds it shared for each of its
// transactions — is never held by them (R-M5: with a year of history a
// locked batch of 1,000 took seconds, the pipeline's longest pause); a
// shadowed record, whose mailbox row can come again, is still deleted only
// under the lock (R-L6).
func TestCleanup_R_M5_R_L6_OnlyShadowedRecordsWaitForRegistration(t *testing.T) {
	t.Parallel()
	h := newHarness(t, maintenanceOptions, func(o *Options) { o.CleanupBatch = 2 })
	tx, done := cleanupDuringRegistration(h, 7, 8) // the dispatcher wrote 7's and 8's markers; 9 is shadowed
	ctx := context.Background()
	require.Eventually(t, func() bool { return h.count(`SELECT count(*) FROM proc_state WHERE msg_id IN (7, 8)`) == 0 },
		20*time.Second, 10*time.Millisecond, "records with written markers are deleted while a registration holds the lock")
	require.Eventually(t, func() bool { return h.count(waitingForLocks) == 1 }, 20*time.Second, 10*time.Millisecond,
		"the shadowed record waits for the registration's lock")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM proc_state WHERE msg_id = 9`))

	require.NoError(t, tx.Commit(ctx))
	awaitDone(t, done, "the cleanup did not finish after the registration committed")
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE msg_id = 9`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM shadow_cleanup WHERE min_msg_id = 9 AND max_msg_id = 9`),
		"only the shadowed record widens the cleaned range")
}

// TestCleanup_R_M5_WithoutShadowedRecordsTakesNoLock: with no shadowed
// record due — every run but a cutover's — the cleanup never takes its
// lock, so no registration ever waits for a batch: a cleanup finishes
// while a registration holds the lock shared. Before, the locked pass
// took the lock to look for shadowed records and held every registration
// while it searched (128 ms measured with a year of history, R-M5).
func TestCleanup_R_M5_WithoutShadowedRecordsTakesNoLock(t *testing.T) {
	t.Parallel()
	h := newHarness(t, maintenanceOptions, func(o *Options) { o.CleanupBatch = 2 })
	_, done := cleanupDuringRegistration(h, 7, 8, 9) // every marker written by the dispatcher
	awaitDone(t, done, "the cleanup waited for a registration although no shadowed record was due")
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE msg_id IN (7, 8, 9)`))
}
