package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/services/processor/internal/sistest"
)

// batchOf2 is a harness whose snapshots write two records per transaction.
func batchOf2(o *Options) { o.SnapshotBatch = 2 }

// fltrs returns records for flights from..to of day23.
var fltrs = sistest.FLTRs

// TestSnapshot_R_C6_US07_WritesInBatchesAndFinishesOnce: each step commits
// one batch (flights, events, progress) and leaves the message open without
// a backfill intent; deletions of absent flights follow the records; only
// the last batch writes the terminal state, once.
//
// Validation 001§6 INV-17b "同事务提交、晚于 Redis、日计划分批".
func TestSnapshot_R_C6_US07_WritesInBatchesAndFinishesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, batchOf2)
	h.run(1, schd(1, "DNLD", fltrs(20, 24)...)) // 5 flights: 3 batches
	h.ack(Ack{FLID: 20, Version: 1}, Ack{FLID: 21, Version: 1}, Ack{FLID: 22, Version: 1}, Ack{FLID: 23, Version: 1}, Ack{FLID: 24, Version: 1})
	require.Equal(t, StateSucceeded, h.state(1))
	require.Contains(t, h.proc(1).Reason, "snapshot: 5 records, 5 changed, 0 deleted, 1 days, 3 batches")

	// The next snapshot changes 15..19 (new), drops 20..24: 5 records
	// (3 batches, the last one with room for one deletion) and 5 deletions.
	h.insert(2, schd(2, "DNLD", fltrs(15, 19)...))
	progressed, _ := h.step()
	require.True(t, progressed)
	r := h.proc(2)
	require.Equal(t, StatePending, r.State, "open between batches")
	require.Equal(t, "snapshot in progress: 2 of 5 records written, 2 changed, 0 deleted, 1 batches committed", r.Reason)
	require.Zero(t, h.mailboxRows(2), "no backfill intent before the whole package")
	require.Equal(t, 2, h.count(`SELECT count(*) FROM flight WHERE flid BETWEEN 15 AND 19`))
	require.Equal(t, 2, h.count(`SELECT count(*) FROM outbox WHERE msg_id=2 AND target='msg'`), "events commit with their batch")
	require.Equal(t, map[int64]int64{15: 1, 16: 1}, h.pending(2))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM snapshot_progress WHERE msg_id=2 AND next_record=2`))

	h.step()
	h.step() // record 19 and the first deletion
	require.Equal(t, StatePending, h.state(2))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM flight WHERE state='DELETED'`))
	h.drain()
	r = h.proc(2)
	require.Equal(t, StateApplied, r.State)
	require.Equal(t, "snapshot: 5 records, 5 changed, 5 deleted, 1 days, 5 batches", r.Reason)
	require.Zero(t, h.count(`SELECT count(*) FROM snapshot_progress`))
	require.Equal(t, 5, h.count(`SELECT count(*) FROM flight WHERE state='DELETED' AND state_version=2`))
	require.Equal(t, 5, h.count(`SELECT count(*) FROM flight WHERE state='ACTIVE' AND state_version=1`))
	require.Zero(t, h.mailboxRows(2))

	// APPLIED until every batch's projections are acked, then SUCCEEDED
	// with exactly one backfill intent.
	var acks []Ack
	for f := int64(15); f <= 24; f++ {
		v := int64(1)
		if f >= 20 {
			v = 2
		}
		acks = append(acks, Ack{FLID: f, Version: v})
	}
	h.ack(acks[:9]...)
	require.Equal(t, StateApplied, h.state(2))
	h.ack(acks[9:]...)
	require.Equal(t, StateSucceeded, h.state(2))
	require.Equal(t, 1, h.mailboxRows(2))
}

// TestSnapshot_R_C6_INV20b_RedoAfterLostProgressBumpsNothing: a run whose
// progress is lost (or a crash before the progress of a batch committed)
// redoes the whole package: the records already written compare equal, so
// no version moves twice and no event is emitted twice.
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
func TestSnapshot_R_C6_INV20b_RedoAfterLostProgressBumpsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, batchOf2)
	h.insert(1, schd(1, "DNLD", fltrs(15, 21)...))
	h.step()
	h.step()
	require.Equal(t, 4, h.count(`SELECT count(*) FROM flight`))
	h.exec(`DELETE FROM snapshot_progress`)
	h.drain()
	require.Equal(t, StateApplied, h.state(1))
	require.Equal(t, 7, h.count(`SELECT count(*) FROM flight WHERE state_version=1`))
	require.Equal(t, 7, h.count(`SELECT count(*) FROM outbox WHERE msg_id=1 AND target='flight-state'`))
	require.Equal(t, 7, h.count(`SELECT count(*) FROM outbox WHERE msg_id=1 AND target='msg'`))
	require.Contains(t, h.proc(1).Reason, "7 records, 3 changed", "the redo counts only what it changed")
}

// TestSnapshot_R_C6_FailureBetweenBatchesResumes: an infrastructure failure
// in a later batch rolls back that batch only; the message is FAILED with
// backoff, keeps the committed batches, and resumes where it stopped.
//
// Validation 001§6 INV-12/INV-13 "PG 事务失败、快照重复或迟到"; 002§8 "PG 事务失败、快照重复或迟到".
// Validation 001§6 INV-17b "同事务提交、晚于 Redis、日计划分批".
func TestSnapshot_R_C6_FailureBetweenBatchesResumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, batchOf2)
	h.insert(1, schd(1, "DNLD", fltrs(15, 19)...))
	h.step()
	h.exec(`ALTER TABLE projection_pending RENAME TO projection_pending_away`)
	h.step()
	r := h.proc(1)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM flight`), "the failed batch wrote nothing")
	require.Zero(t, h.mailboxRows(1))
	h.exec(`ALTER TABLE projection_pending_away RENAME TO projection_pending`)
	h.clk.Advance(time.Second)
	h.drain()
	r = h.proc(1)
	require.Equal(t, StateApplied, r.State)
	require.Equal(t, "snapshot: 5 records, 5 changed, 0 deleted, 1 days, 3 batches", r.Reason)
	require.Equal(t, 5, h.count(`SELECT count(*) FROM flight WHERE state_version=1`))
	require.Equal(t, 5, h.count(`SELECT count(*) FROM outbox WHERE msg_id=1 AND target='msg'`))
}

// TestSnapshot_R_C6_INV19_InvalidPackageIsRefusedBeforeAnyBatch: whole
// package validation comes first, also when it spans several batches.
//
// Validation 001§6 INV-12 "运营日冲突".
// Validation 001§6 INV-19 "整包协议拒绝"; 002§8 "整包协议拒绝".
func TestSnapshot_R_C6_INV19_InvalidPackageIsRefusedBeforeAnyBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, batchOf2)
	h.run(1, schd(1, "DNLD", fltr(30, day24)))
	before := h.snapshotTables()
	recs := append(fltrs(15, 20), fltr(30, day23)) // the last record moves flight 30 to another day
	h.run(2, schd(2, "DNLD", recs...))
	r := h.proc(2)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassProtocol, r.ErrorClass)
	require.Contains(t, r.Reason, "flight 30 would move")
	require.Equal(t, before, h.snapshotTables())
}

// TestSnapshot_R_C6_ManyBatchesOfOneRecordEach exercises the smallest
// batch: every record, then every deletion, in its own transaction.
func TestSnapshot_R_C6_ManyBatchesOfOneRecordEach(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.SnapshotBatch = 1 })
	h.run(1, schd(1, "DNLD", fltrs(15, 17)...))
	h.run(2, schd(2, "DNLD", fltr(18, day23)))
	r := h.proc(2)
	require.Equal(t, StateApplied, r.State)
	require.Equal(t, "snapshot: 1 records, 1 changed, 3 deleted, 1 days, 4 batches", r.Reason)
	require.Equal(t, 3, h.count(`SELECT count(*) FROM flight WHERE state='DELETED'`))
}
