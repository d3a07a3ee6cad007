package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// sibling is another engine on the harness's database with the same
// options: another process of the processor, started after this one.
func (h *harness) sibling() *Engine {
	h.t.Helper()
	opt := h.e.opt
	opt.Pool = h.pool
	e, err := NewEngine(opt)
	require.NoError(h.t, err)
	return e
}

// lockTable holds a SHARE lock on table until the returned function is
// called: every write to it waits, so an execution that writes it stays in
// flight — inside its handler, past its marker — for as long as the test
// needs.
func (h *harness) lockTable(table string) (release func()) {
	h.t.Helper()
	ctx := context.Background()
	tx, err := h.pool.Begin(ctx)
	require.NoError(h.t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{table}.Sanitize()+` IN SHARE MODE`)
	require.NoError(h.t, err)
	done := false
	release = func() {
		if !done {
			done = true
			require.NoError(h.t, tx.Rollback(ctx))
		}
	}
	h.t.Cleanup(release)
	return release
}

// lockWaiter waits until a session of the database waits for a lock — an
// execution blocked in its handler — and returns its backend PID.
func (h *harness) lockWaiter() int32 {
	h.t.Helper()
	var pid int32
	require.Eventually(h.t, func() bool {
		err := h.pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' LIMIT 1`).Scan(&pid)
		return err == nil
	}, 30*time.Second, 5*time.Millisecond, "no execution blocked in its handler")
	return pid
}

// stepPastGrace runs a Step of e on a head carrying the marker of an
// instance whose process is gone: the first Step waits for that instance
// to withdraw it, nobody does, and once MarkerGrace has passed on the
// harness's clock the next Step counts the execution (R-H1).
func (h *harness) stepPastGrace(ctx context.Context, e *Engine) (bool, time.Duration, error) {
	h.t.Helper()
	progressed, wait, err := e.Step(ctx)
	if err != nil || progressed {
		return progressed, wait, err
	}
	require.LessOrEqual(h.t, wait, markerPoll, "the marker's instance gets its grace")
	h.clk.Advance(orDefault(e.opt.MarkerGrace, DefaultMarkerGrace))
	return e.Step(ctx)
}

// stepAsync runs one Step of e in the background.
func stepAsync(ctx context.Context, e *Engine) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, _, err := e.Step(ctx)
		done <- err
	}()
	return done
}

// await returns the result of a background Step, failing after a deadline.
func await(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("step did not return")
		return nil
	}
}

// TestExecutor_R_H1_CrashAtHeadCountsAsAttempt: an execution of the head
// that ends with its process — simulated by cutting the engine's session
// while the handler runs and abandoning the engine, so it records nothing —
// is counted by the next engine on the same database as a failed attempt
// with backoff; after max-attempts such ends the head is DEAD(EXHAUSTED)
// and the next message runs. The head deadline still measures from the
// first execution's start.
func TestExecutor_R_H1_CrashAtHeadCountsAsAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxAttempts = 3 })
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "killer")))
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G2", "next")))
	release := h.lockTable("ref_data")

	e := h.e
	for died := 0; died < 3; died++ {
		if died > 0 {
			// A new process: it finds the marker of the one that died.
			e = h.sibling()
			// Bounded: an engine that did not see the ended execution would
			// run the head again and wait for the lock.
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			progressed, _, err := h.stepPastGrace(sctx, e)
			cancel()
			require.NoError(t, err, "the ended execution is recorded, not run again")
			require.True(t, progressed)
			r := h.proc(1)
			require.Equal(t, StateFailed, r.State)
			require.Equal(t, ClassInfra, r.ErrorClass)
			require.Equal(t, died, r.Attempts, "each ended execution is one attempt")
			require.Contains(t, r.Reason, "ended its process")
			require.True(t, r.NextAttemptAt.Equal(h.clk.Now().Add(e.opt.Retry.Delay(died))), "backoff as for any failure")
			_, wait, err := e.Step(context.Background())
			require.NoError(t, err)
			require.Equal(t, e.opt.Retry.Delay(died), wait, "the head waits out its backoff")
			h.clk.Advance(wait)
		}
		done := stepAsync(context.Background(), e)
		pid := h.lockWaiter()
		require.NotEmpty(t, h.markerOf(1), "the head is marked before it executes")
		require.True(t, h.proc(1).ProcessingStartedAt.Equal(t0), "processing start is the first execution's")
		h.exec(`SELECT pg_terminate_backend($1)`, pid) // the process is gone mid-execution
		require.Error(t, await(t, done))
	}
	e = h.sibling()
	progressed, _, err := h.stepPastGrace(context.Background(), e)
	require.NoError(t, err)
	require.True(t, progressed)
	r := h.proc(1)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassExhausted, r.ErrorClass)
	require.Equal(t, 3, r.Attempts)
	require.Contains(t, r.Reason, "gave up after 3 attempts (last INFRA: execution by")
	require.Equal(t, 1, h.mailboxRows(1), "DEAD carries its backfill intent")
	require.Empty(t, h.markerOf(1))
	require.Empty(t, h.refKeys("GLST"), "no ended execution left a write")

	release()
	for progressed := true; progressed; {
		progressed, _, err = e.Step(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, StateSucceeded, h.state(2), "the pipeline moved on")
	require.Equal(t, []string{"G2"}, h.refKeys("GLST"))
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE executing_by IS NOT NULL`), "no marker outlives its execution")
}

// markerOf returns proc_state.executing_by of id, "" when NULL.
func (h *harness) markerOf(id int64) string {
	h.t.Helper()
	var by *string
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT executing_by FROM proc_state WHERE msg_id=$1`, id).Scan(&by))
	if by == nil {
		return ""
	}
	return *by
}

// TestExecutor_R_H1_FailedAttemptIsCountedOnce: an execution that fails
// normally withdraws its marker with its failure, so another engine
// taking over counts the failure once and the crash never; the next
// execution keeps the first processing start.
func TestExecutor_R_H1_FailedAttemptIsCountedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, infraRaw)
	h.step()
	r := h.proc(1)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, 1, r.Attempts)
	require.Empty(t, h.markerOf(1), "a recorded failure leaves no marker")

	e := h.sibling()
	h.clk.Advance(time.Second)
	progressed, _, err := e.Step(context.Background())
	require.NoError(t, err)
	require.True(t, progressed)
	r = h.proc(1)
	require.Equal(t, 2, r.Attempts, "one failure, one attempt: no crash counted on top")
	require.Equal(t, ClassInfra, r.ErrorClass)
	require.True(t, r.ProcessingStartedAt.Equal(t0))
}

// TestExecutor_R_H1_NextHeadMarkedByThePreviousCommit: the transaction that
// finishes a message marks the next head, so a stream executes with one
// commit per message; the marker moves along and the last one is cleared.
func TestExecutor_R_H1_NextHeadMarkedByThePreviousCommit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "a")))
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G2", "b")))
	h.insert(3, infraRaw)
	h.step()
	require.Equal(t, StateSucceeded, h.state(1))
	require.Empty(t, h.markerOf(1))
	require.Equal(t, h.e.instance, h.markerOf(2), "finishing 1 marked 2")
	require.True(t, h.proc(2).ProcessingStartedAt.Equal(t0))
	h.step()
	require.Equal(t, h.e.instance, h.markerOf(3), "finishing 2 marked 3")
	h.step()
	require.Equal(t, StateFailed, h.state(3))
	require.Empty(t, h.markerOf(3), "a head in backoff is not marked")
}

// TestExecutor_R_H1_StopMidExecutionIsNotAnAttempt: an execution cut short
// by a shutdown (the context ends, the process lives) withdraws its marker,
// so the next start does not count it.
func TestExecutor_R_H1_StopMidExecutionIsNotAnAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "a")))
	release := h.lockTable("ref_data")
	ctx, cancel := context.WithCancel(context.Background())
	done := stepAsync(ctx, h.e)
	h.lockWaiter()
	require.NotEmpty(t, h.markerOf(1))
	cancel()
	require.ErrorIs(t, await(t, done), context.Canceled)
	release()
	require.Empty(t, h.markerOf(1), "the stopping engine withdrew its marker")
	e := h.sibling()
	progressed, _, err := e.Step(context.Background())
	require.NoError(t, err)
	require.True(t, progressed)
	r := h.proc(1)
	require.Equal(t, StateSucceeded, r.State)
	require.Zero(t, r.Attempts)
}

// TestExecutor_R_H1_PanicInHandlerIsTheMessagesFailure: a panic while
// decoding or handling one message is recovered at the handler boundary:
// its transaction rolls back, it is recorded as that message's INFRA
// failure naming the panic and where it happened, retried with backoff,
// DEAD(EXHAUSTED) when it keeps panicking, and the pipeline goes on.
func TestExecutor_R_H1_PanicInHandlerIsTheMessagesFailure(t *testing.T) {
	t.Parallel()
	for _, stage := range []string{"decoding", "classifying", "handling"} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			h := newHarness(t, func(o *Options) {
				o.MaxAttempts = 2
				o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
			})
			h.run(1, schd(1, "DNLD", fltr(15, day23)))
			before := h.snapshotTables()
			h.insert(2, flopMsg(2, "STND", flopRec(15, "<STND>S1</STND>")))
			h.insert(3, refMsg(3, "GLST", "ADD", glst("G1", "a")))
			ctx := context.WithValue(context.Background(), stageHookKey{}, stageHook(func(s string, id int64) {
				if s == stage && id == 2 {
					panic(fmt.Sprintf("boom in %s of %d", s, id))
				}
			}))
			progressed, _, err := h.e.Step(ctx)
			require.NoError(t, err)
			require.True(t, progressed)
			r := h.proc(2)
			require.Equal(t, StateFailed, r.State)
			require.Equal(t, ClassInfra, r.ErrorClass)
			require.Equal(t, 1, r.Attempts)
			require.Contains(t, r.Reason, "panic while "+stage+": boom in "+stage+" of 2")
			require.Contains(t, r.Reason, "(at ", "a stack summary")
			require.Contains(t, r.Reason, "crash_test.go:", "the panicking frame")
			require.Equal(t, before, h.snapshotTables(), "the panicking attempt wrote nothing")
			require.Empty(t, h.markerOf(2))

			h.clk.Advance(time.Second)
			progressed, _, err = h.e.Step(ctx)
			require.NoError(t, err)
			require.True(t, progressed)
			r = h.proc(2)
			require.Equal(t, StateDead, r.State)
			require.Equal(t, ClassExhausted, r.ErrorClass)
			require.Contains(t, r.Reason, "last INFRA: panic while "+stage)
			for progressed := true; progressed; {
				progressed, _, err = h.e.Step(ctx)
				require.NoError(t, err)
			}
			require.Equal(t, StateSucceeded, h.state(3), "the pipeline goes on")
			require.Equal(t, int64(2), counterValue(t, reader, "msgx_processor_handler_panics_total"))
		})
	}
}

// counterValue sums every point of an int64 counter.
func counterValue(t *testing.T, r *sdkmetric.ManualReader, name string, attrs ...string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is an int64 counter", name)
		points:
			for _, p := range sum.DataPoints {
				for i := 0; i+1 < len(attrs); i += 2 {
					if v, ok := p.Attributes.Value(attribute.Key(attrs[i])); !ok || v.AsString() != attrs[i+1] {
						continue points
					}
				}
				n += p.Value
			}
		}
	}
	return n
}

// TestExecutor_R_H3_OperatorEndsHeadWhileExecuting: the control plane ends
// the head as DEAD (its own transaction, with the backfill intent) while
// the executor is inside the head's transaction. The executor's final
// state write finds the message no longer open: its transaction rolls
// back — nothing the handler wrote stays — no failure is recorded, the
// step succeeds, and the next message runs.
func TestExecutor_R_H3_OperatorEndsHeadWhileExecuting(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	h := newHarness(t, func(o *Options) {
		o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	})
	h.insert(1, refMsg(1, "GLST", "ADD", glst("G1", "first")))
	h.insert(2, refMsg(2, "GLST", "ADD", glst("G2", "ended by the operator")))
	h.insert(3, refMsg(3, "GLST", "ADD", glst("G3", "next")))
	h.step() // 1 succeeds and marks 2: its execution starts with no write of its own

	// The operator's transaction ends 2 and holds its row until it commits.
	ctx := context.Background()
	op, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = op.Rollback(ctx) }()
	tag, err := op.Exec(ctx, `
		WITH u AS (
			UPDATE proc_state SET state='DEAD', error_class='OPERATOR', reason='ended by alice: stuck', finished_at=now(), updated_at=now()
			WHERE msg_id=2 AND state IN ('PENDING', 'FAILED', 'APPLIED') RETURNING msg_id)
		INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		SELECT 'mailbox', msg_id::text, msg_id, now(), now() FROM u`)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	done := stepAsync(ctx, h.e)
	h.lockWaiter() // the executor is inside 2's transaction, waiting for the row
	require.NoError(t, op.Commit(ctx))
	require.NoError(t, await(t, done), "the executor moves on without an error")

	r := h.proc(2)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, "OPERATOR", r.ErrorClass)
	require.Equal(t, "ended by alice: stuck", r.Reason)
	require.Zero(t, r.Attempts, "no failure recorded")
	require.Empty(t, r.IdentityKey, "the executor's transaction rolled back")
	require.Equal(t, 1, h.mailboxRows(2), "the operator's backfill intent only")
	require.Equal(t, []string{"G1"}, h.refKeys("GLST"), "nothing of 2's handler stays")
	require.Zero(t, counterValue(t, reader, "msgx_processor_failed_total"))

	h.drain()
	require.Equal(t, StateSucceeded, h.state(3))
	require.Equal(t, []string{"G1", "G3"}, h.refKeys("GLST"))
}

// TestExecutor_R_H1_NormalPathAddsNoCommitPerMessage measures what the
// execution marker costs: a stream of messages waiting in the FIFO is
// executed with exactly one durable commit per message (each marks the
// next head) plus one for the first head — the same as without the marker
// — counted by the processor's transaction metric, and cross-checked with
// PostgreSQL's own count of committed transactions in the test's private
// database: three per message (the replay probe and the head read, which
// commit nothing durable, and the message's transaction), well below four.
func TestExecutor_R_H1_NormalPathAddsNoCommitPerMessage(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	h := newHarness(t, func(o *Options) {
		o.Meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	})
	const n = 200
	for id := int64(1); id <= n; id++ {
		h.insert(id, refMsg(id, "GLST", "ADD", glst(fmt.Sprintf("G%d", id), "x")))
	}
	registered := counterValue(t, reader, "msgx_processor_transactions_total", "outcome", "committed")
	before := h.xactCommits()
	h.drain()
	after := h.xactCommits()
	require.Equal(t, n, h.count(`SELECT count(*) FROM proc_state WHERE state='SUCCEEDED'`))
	commits := counterValue(t, reader, "msgx_processor_transactions_total", "outcome", "committed") - registered
	t.Logf("%d messages: %d processor commits, %d PostgreSQL commits (%.2f per message)", n, commits, after-before, float64(after-before)/n)
	require.Equal(t, int64(n+1), commits, "one commit per message, one for the first head's marker")
	// A fourth transaction per message would be 4n; the margin above 3n
	// absorbs the pool's idle-connection pings and the reads of this test.
	require.Less(t, after-before, int64(3*n+n/2), "PostgreSQL counts no extra transaction per message")
}

// xactCommits returns PostgreSQL's count of committed transactions in the
// harness's database, once every session of the database has reported it:
// the engine's sessions are closed, and the count is read from another
// database, so the reading itself is not counted.
func (h *harness) xactCommits() int64 {
	h.t.Helper()
	ctx := context.Background()
	var db string
	require.NoError(h.t, h.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	h.pool.Reset() // every pooled session ends and flushes its statistics
	cfg := h.pool.Config().ConnConfig.Copy()
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(h.t, err)
	defer conn.Close(ctx)
	require.Eventually(h.t, func() bool {
		var sessions int
		require.NoError(h.t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname=$1`, db).Scan(&sessions))
		return sessions == 0
	}, 30*time.Second, 5*time.Millisecond, "sessions of %s did not end", db)
	var n int64
	_, err = conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
	require.NoError(h.t, err)
	require.NoError(h.t, conn.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname=$1`, db).Scan(&n))
	return n
}
