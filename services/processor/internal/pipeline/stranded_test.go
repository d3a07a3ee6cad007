package pipeline

import (
	"context"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
)

// withHook returns ctx carrying hook at point p.
func withHook(ctx context.Context, p hookPoint, hook txHook) context.Context {
	return context.WithValue(ctx, p, hook)
}

// blockedBy reports whether some backend waits for a lock held by the
// backend pid.
func (h *harness) blockedBy(pid uint32) bool {
	h.t.Helper()
	var blocked bool
	require.NoError(h.t, h.pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)))`, int32(pid)).Scan(&blocked))
	return blocked
}

// runConcurrently starts fn in its own goroutine and returns once fn has
// returned or is waiting for a lock that the transaction tx holds: the
// point where fn can no longer make progress before tx ends. The returned
// channel yields fn's error.
func (h *harness) runConcurrently(tx pgx.Tx, fn func() error) <-chan error {
	h.t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	pid := tx.Conn().PgConn().PID()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			done <- err
			return done
		case <-deadline:
			h.t.Fatal("concurrent transaction neither finished nor waited for the lock within 10 s")
		case <-tick.C:
			if h.blockedBy(pid) {
				return done
			}
		}
	}
}

// TestAcks_R_H4_AckOverlappingTheLastSnapshotBatchFinishesTheMessage forces
// the interleaving of the incident: a daily snapshot in batches whose last
// batch changes nothing is marked APPLIED because its first batch's
// projection is still pending, and the ack of that projection runs while
// the last batch's transaction is still open. Each side's decision must see
// the other's committed work: the message ends SUCCEEDED with exactly one
// backfill intent and nothing pending — never APPLIED with nothing pending,
// which no later ack could finish.
func TestAcks_R_H4_AckOverlappingTheLastSnapshotBatchFinishesTheMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.SnapshotBatch = 1 })
	h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23)))
	h.ack(Ack{FLID: 15, Version: 1}, Ack{FLID: 16, Version: 1})
	require.Equal(t, StateSucceeded, h.state(1))

	// Message 2 changes flight 15 in its first batch; its second and last
	// batch rewrites flight 16 unchanged and deletes nothing.
	h.insert(2, schd(2, "DNLD", fltr(15, day23, "<STND>S1</STND>"), fltr(16, day23)))
	progressed, _ := h.step()
	require.True(t, progressed)
	require.Equal(t, StatePending, h.state(2))
	require.Equal(t, map[int64]int64{15: 2}, h.pending(2))

	var ackDone <-chan error
	ctx := withHook(context.Background(), hookApplied, func(ctx context.Context, tx pgx.Tx, msgID int64) {
		if msgID != 2 {
			return
		}
		// The last batch has decided APPLIED and not committed: the ack of
		// the first batch's projection runs now, on its own connection.
		ackDone = h.runConcurrently(tx, func() error {
			return h.e.ApplyAcks(context.Background(), []Ack{{FLID: 15, Version: 2}})
		})
	})
	progressed, _, err := h.e.Step(ctx)
	require.NoError(t, err)
	require.True(t, progressed)
	require.NotNil(t, ackDone, "the last batch marked the message APPLIED")
	require.NoError(t, <-ackDone)

	r := h.proc(2)
	require.Equal(t, StateSucceeded, r.State, "APPLIED with nothing pending is stranded: no later ack finishes it")
	require.Equal(t, "snapshot: 2 records, 1 changed, 0 deleted, 1 days, 2 batches", r.Reason)
	require.NotNil(t, r.FinishedAt)
	require.Empty(t, h.pending(2))
	require.Equal(t, 1, h.mailboxRows(2))
}

// TestMarkApplied_R_H4_DecidesUnderTheRowLock: an ack transaction that
// holds the message's row and removed its last pending projection commits
// while the executor waits to mark the message APPLIED. The executor
// decides after it holds the row, so it sees the ack's work and finishes
// the message SUCCEEDED with its backfill intent instead of APPLIED with
// nothing pending.
func TestMarkApplied_R_H4_DecidesUnderTheRowLock(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset) VALUES (1, 'PENDING', 'x', 0)`)
	h.exec(`INSERT INTO projection_pending (msg_id, flid, version) VALUES (1, 15, 1)`)

	ack, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = ack.Rollback(ctx) }()
	_, err = ack.Exec(ctx, `SELECT 1 FROM proc_state WHERE msg_id=1 FOR NO KEY UPDATE`)
	require.NoError(t, err)
	_, err = ack.Exec(ctx, `DELETE FROM projection_pending WHERE msg_id=1`)
	require.NoError(t, err)

	exec, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = exec.Rollback(ctx) }()
	marked := make(chan error, 1)
	go func() {
		marked <- h.e.markApplied(ctx, exec, 1, &metaCols{SNDR: "AODB", TYPE: "SCHD", STYP: "DNLD", SEQN: "1"}, "snapshot: done")
	}()
	pid := ack.Conn().PgConn().PID()
	require.Eventually(t, func() bool { return h.blockedBy(pid) }, 10*time.Second, 2*time.Millisecond,
		"the executor waits for the ack transaction's row lock")
	require.NoError(t, ack.Commit(ctx))
	require.NoError(t, <-marked)
	require.NoError(t, exec.Commit(ctx))

	r := h.proc(1)
	require.Equal(t, StateSucceeded, r.State)
	require.Equal(t, "snapshot: done", r.Reason)
	require.NotNil(t, r.FinishedAt)
	require.Equal(t, 1, h.mailboxRows(1))
}

// selfCheckHarness is a harness whose metrics are collected by a manual
// reader, with a two-minute self-check grace.
func selfCheckHarness(t *testing.T, mutate ...func(*Options)) (*harness, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h := newHarness(t, append([]func(*Options){func(o *Options) {
		o.Meter = mp.Meter("test")
		o.SelfCheckGrace = 2 * time.Minute
	}}, mutate...)...)
	return h, reader
}

// repaired returns msgx_processor_selfcheck_repaired_total by kind; a kind
// that is not exported is missing from the map.
func repaired(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "msgx_processor_selfcheck_repaired_total" {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "a counter")
			for _, p := range sum.DataPoints {
				k, _ := p.Attributes.Value("kind")
				out[k.AsString()] = p.Value
			}
		}
	}
	return out
}

func (h *harness) selfCheck() SelfCheckResult {
	h.t.Helper()
	res, err := h.e.RunSelfCheck(context.Background())
	require.NoError(h.t, err)
	return res
}

// TestSelfCheck_R_H4_FinishesAppliedWithoutPendingProjection: an APPLIED
// message without a pending projection, older than the grace, is finished
// SUCCEEDED with exactly one backfill intent and counted; one still inside
// the grace waits for a later run; one with a pending projection is left
// to its ack. The counter is exported at zero before any repair.
func TestSelfCheck_R_H4_FinishesAppliedWithoutPendingProjection(t *testing.T) {
	t.Parallel()
	h, reader := selfCheckHarness(t)
	require.Equal(t, map[string]int64{StrandedApplied: 0, StrandedTerminal: 0}, repaired(t, reader))

	now := h.clk.Now()
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset, applied_at, reason) VALUES
		(1, 'APPLIED', 'x', 0, $1, 'snapshot: 2 records'), (2, 'APPLIED', 'x', 1, $1, NULL), (3, 'APPLIED', 'x', 2, $2, NULL)`,
		now.Add(-3*time.Minute), now.Add(-time.Minute))
	h.exec(`INSERT INTO projection_pending (msg_id, flid, version) VALUES (2, 15, 4)`)

	res := h.selfCheck()
	require.Equal(t, []int64{1}, res.Applied)
	require.Empty(t, res.Terminal)
	r := h.proc(1)
	require.Equal(t, StateSucceeded, r.State)
	require.Equal(t, "snapshot: 2 records", r.Reason, "the outcome's reason is kept")
	require.NotNil(t, r.FinishedAt)
	require.True(t, now.Equal(*r.FinishedAt))
	require.Equal(t, 1, h.mailboxRows(1))
	require.Equal(t, StateApplied, h.state(2), "a pending projection is its next step")
	require.Zero(t, h.mailboxRows(2))
	require.Equal(t, StateApplied, h.state(3), "inside the grace")
	require.Equal(t, map[string]int64{StrandedApplied: 1, StrandedTerminal: 0}, repaired(t, reader))

	h.clk.Advance(90 * time.Second) // one minute old before: now past the two-minute grace
	res = h.selfCheck()
	require.Equal(t, []int64{3}, res.Applied)
	require.Equal(t, StateSucceeded, h.state(3))
	require.Equal(t, 1, h.mailboxRows(3))

	res = h.selfCheck()
	require.Empty(t, res.Applied, "a repaired message is not repaired again")
	require.Empty(t, res.Terminal)
	require.Equal(t, 1, h.mailboxRows(1))
	require.Equal(t, StateApplied, h.state(2))
	require.Equal(t, map[string]int64{StrandedApplied: 2, StrandedTerminal: 0}, repaired(t, reader))
}

// TestSelfCheck_R_H4_WritesTheMissingBackfillIntent: a terminal message
// whose marker is not written and that has no intent waiting gets one —
// also a replayed message whose only intent was SENT for its earlier
// outcome — with its finish time as the intent's creation time; messages
// with an intent (PENDING, DEAD, ABANDONED) or a written marker are left
// alone, and one inside the grace waits for a later run.
func TestSelfCheck_R_H4_WritesTheMissingBackfillIntent(t *testing.T) {
	t.Parallel()
	h, reader := selfCheckHarness(t)
	now := h.clk.Now()
	old := now.Add(-5 * time.Minute)
	h.exec(`INSERT INTO proc_state (msg_id, state, error_class, raw, kafka_offset, finished_at, backfilled_at) VALUES
		(10, 'SUCCEEDED', NULL, 'x', 0, $1, NULL),
		(11, 'SKIPPED', NULL, 'x', 1, $1, NULL),
		(12, 'DEAD', 'MALFORMED', 'x', 2, $1, NULL),
		(13, 'DEAD', 'PROTOCOL', 'x', 3, $1, NULL),
		(14, 'SUCCEEDED', NULL, 'x', 4, $1, $1),
		(15, 'DEAD', 'EXHAUSTED', 'x', 5, $1, NULL),
		(16, 'SUCCEEDED', NULL, 'x', 6, $2, NULL),
		(17, 'DEAD', 'INFRA', 'x', 7, $1, NULL),
		(18, 'PENDING', NULL, 'x', 8, NULL, NULL)`, old, now.Add(-time.Minute))
	h.exec(`INSERT INTO outbox (target, pkey, msg_id, state) VALUES
		('mailbox', '12', 12, 'PENDING'), ('mailbox', '13', 13, 'ABANDONED'), ('mailbox', '14', 14, 'SENT'),
		('mailbox', '15', 15, 'SENT'), ('mailbox', '17', 17, 'DEAD'), ('msg', '10', 10, 'PENDING')`)

	res := h.selfCheck()
	require.Empty(t, res.Applied)
	require.Equal(t, []int64{10, 11, 15}, res.Terminal)
	for _, id := range []int64{10, 11} {
		require.Equal(t, 1, h.mailboxRows(id), "message %d", id)
	}
	require.Equal(t, 2, h.mailboxRows(15), "the earlier SENT intent and the new one")
	var created, due time.Time
	require.NoError(t, h.pool.QueryRow(context.Background(), `
		SELECT created_at, next_attempt_at FROM outbox WHERE target='mailbox' AND msg_id=10 AND state='PENDING'`).Scan(&created, &due))
	require.True(t, old.Equal(created), "created at the finish: the dispatcher's overdue bound counts from there")
	require.True(t, now.Equal(due), "due at once")
	for _, id := range []int64{12, 13, 14, 17} {
		require.Equal(t, 1, h.mailboxRows(id), "message %d keeps its one intent", id)
	}
	require.Zero(t, h.mailboxRows(16), "inside the grace")
	require.Zero(t, h.mailboxRows(18), "an open message has no intent")
	require.Equal(t, map[string]int64{StrandedApplied: 0, StrandedTerminal: 3}, repaired(t, reader))

	h.clk.Advance(90 * time.Second) // one minute old before: now past the two-minute grace
	res = h.selfCheck()
	require.Equal(t, []int64{16}, res.Terminal)
	require.Equal(t, 1, h.mailboxRows(16))
	require.Empty(t, h.selfCheck().Terminal, "a repaired message is not repaired again")
	require.Equal(t, map[string]int64{StrandedApplied: 0, StrandedTerminal: 4}, repaired(t, reader))
}

// TestSelfCheck_R_H4_WaitsForALiveTransactionInsteadOfRacingIt: the
// self-check reads a stranded-looking APPLIED message while another
// transaction holds its row and is finishing it; the repair waits for that
// transaction, re-checks after it committed and does nothing: one intent,
// no repair counted.
func TestSelfCheck_R_H4_WaitsForALiveTransactionInsteadOfRacingIt(t *testing.T) {
	t.Parallel()
	h, reader := selfCheckHarness(t)
	ctx := context.Background()
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset, applied_at) VALUES (1, 'APPLIED', 'x', 0, $1)`,
		h.clk.Now().Add(-time.Hour))

	live, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = live.Rollback(ctx) }()
	_, err = live.Exec(ctx, `SELECT 1 FROM proc_state WHERE msg_id=1 FOR NO KEY UPDATE`)
	require.NoError(t, err)
	_, err = live.Exec(ctx, `
		WITH s AS (UPDATE proc_state SET state='SUCCEEDED', finished_at=$1 WHERE msg_id=1 RETURNING msg_id)
		INSERT INTO outbox (target, pkey, msg_id) SELECT 'mailbox', msg_id::text, msg_id FROM s`, h.clk.Now())
	require.NoError(t, err)

	checked := make(chan SelfCheckResult, 1)
	go func() {
		res, err := h.e.RunSelfCheck(ctx)
		assert.NoError(t, err)
		checked <- res
	}()
	pid := live.Conn().PgConn().PID()
	require.Eventually(t, func() bool { return h.blockedBy(pid) }, 10*time.Second, 2*time.Millisecond,
		"the repair waits for the row")
	require.NoError(t, live.Commit(ctx))
	res := <-checked
	require.Empty(t, res.Applied)
	require.Empty(t, res.Terminal)
	require.Equal(t, StateSucceeded, h.state(1))
	require.Equal(t, 1, h.mailboxRows(1))
	require.Equal(t, map[string]int64{StrandedApplied: 0, StrandedTerminal: 0}, repaired(t, reader))
}

// TestSelfCheck_R_H4_MaintenanceLoopRunsItAtStartAndEveryInterval: the
// processor-maintenance loop runs the self-check once when it starts and
// then whenever the injected clock passes the self-check interval.
func TestSelfCheck_R_H4_MaintenanceLoopRunsItAtStartAndEveryInterval(t *testing.T) {
	t.Parallel()
	h, reader := selfCheckHarness(t, func(o *Options) {
		o.MaintenancePoll = 5 * time.Millisecond
		o.SelfCheckInterval = 30 * time.Second
	})
	now := h.clk.Now()
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset, applied_at) VALUES (1, 'APPLIED', 'x', 0, $1)`, now.Add(-time.Hour))

	m := lifecycle.NewManager(slog.New(slog.NewTextHandler(tLog{t}, nil)), h.e.maintenanceService())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	// Each wait is for the repair's count, which the self-check adds after
	// the repair committed: waiting for the committed row and then reading
	// the counter raced that gap (it failed once on a loaded machine).
	waitRepaired := func(want map[string]int64, msg string) {
		t.Helper()
		var got map[string]int64
		require.Eventually(t, func() bool {
			got = repaired(t, reader)
			return reflect.DeepEqual(want, got)
		}, 30*time.Second, 5*time.Millisecond, "%s: repaired %v", msg, got)
	}
	waitRepaired(map[string]int64{StrandedApplied: 1, StrandedTerminal: 0}, "the first self-check runs at start")
	require.Equal(t, StateSucceeded, h.state(1))

	// Finished (at the start time) but never given an intent: not found at
	// start (inside the grace), found by the first run after the clock
	// passes start + interval, by then past the grace.
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset, finished_at) VALUES (2, 'SKIPPED', 'x', 1, $1)`, now.Add(-2*time.Minute))
	h.clk.Advance(30 * time.Second)
	waitRepaired(map[string]int64{StrandedApplied: 1, StrandedTerminal: 1}, "the next self-check runs after the interval")
	require.Equal(t, 1, h.mailboxRows(2))
}

// TestSelfCheck_R_H4_R_H6_StaleTermRepairsNothing: under a lease term whose
// token another instance replaced, the self-check's first repair is
// refused inside PostgreSQL: nothing is committed, nothing is counted, the
// run stops at once and the term ends.
func TestSelfCheck_R_H4_R_H6_StaleTermRepairsNothing(t *testing.T) {
	t.Parallel()
	h, reader := selfCheckHarness(t, func(o *Options) {
		o.Elector = electorFunc(func(context.Context, string, string, func(context.Context, int64) error) error { return nil })
	})
	old := h.clk.Now().Add(-time.Hour)
	h.exec(`INSERT INTO proc_state (msg_id, state, raw, kafka_offset, applied_at, finished_at) VALUES
		(1, 'APPLIED', 'x', 0, $1, NULL), (2, 'APPLIED', 'x', 1, $1, NULL), (3, 'DEAD', 'x', 2, NULL, $1)`, old)
	h.grantLease(8) // another instance holds the lease with a newer token
	before := h.dbDigest()

	ctx, end := h.e.db.Start(context.Background(), 7)
	defer end()
	res, err := h.e.RunSelfCheck(ctx)
	require.ErrorIs(t, err, lease.ErrFenced)
	require.Empty(t, res.Applied)
	require.Empty(t, res.Terminal)
	require.ErrorIs(t, context.Cause(ctx), lease.ErrFenced, "the refusal ends the term")
	require.Equal(t, before, h.dbDigest(), "a fenced self-check commits nothing")
	require.Equal(t, map[string]int64{StrandedApplied: 0, StrandedTerminal: 0}, repaired(t, reader))
}
