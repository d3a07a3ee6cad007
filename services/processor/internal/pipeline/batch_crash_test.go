package pipeline

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stepOrDie runs one Step of e in a goroutine of its own and reports
// whether that goroutine died before Step returned: a process that ends in
// the middle of an execution, as seen by PostgreSQL (its open transaction
// is rolled back, what it committed before stays) and by the engine (it
// records nothing more).
func stepOrDie(t *testing.T, ctx context.Context, e *Engine) (progressed bool, wait time.Duration, err error, died bool) {
	t.Helper()
	type result struct {
		progressed bool
		wait       time.Duration
		err        error
	}
	res := make(chan result, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		p, w, err := e.Step(ctx)
		res <- result{p, w, err}
	}()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("step did not return")
	}
	select {
	case r := <-res:
		return r.progressed, r.wait, r.err, false
	default:
		return false, 0, nil, true
	}
}

// poisonCtx makes deciding msgID end the goroutine deciding it, every
// time: runtime.Goexit unwinds past the handler's panic guard, which
// recovers panics only, like an out-of-memory kill or SIGKILL ends a
// process wherever it is.
func poisonCtx(msgID int64) context.Context {
	return context.WithValue(context.Background(), stageHookKey{}, stageHook(func(stage string, id int64) {
		if stage == "handling" && id == msgID {
			runtime.Goexit()
		}
	}))
}

// instanceNames matches the instance a crash reason names; each engine
// (process) has its own.
var instanceNames = regexp.MustCompile(`execution by \S+ ended`)

// withoutInstances replaces the instance names in a dump by one name.
func withoutInstances(dump map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, rows := range dump {
		for _, r := range rows {
			out[k] = append(out[k], instanceNames.ReplaceAllString(r, "execution by INSTANCE ended"))
		}
	}
	return out
}

// runUntilSettled steps the harness's stream, replacing the engine by a
// new one (the next process) each time one dies, and waiting out backoffs
// on the fake clock, until nothing is open. It returns how many engines
// died.
func (h *harness) runUntilSettled(ctx context.Context) (deaths int) {
	h.t.Helper()
	e := h.e
	for i := 0; i < 200; i++ {
		progressed, wait, err, died := stepOrDie(h.t, ctx, e)
		if died {
			deaths++
			e = h.sibling()
			continue
		}
		require.NoError(h.t, err)
		if progressed {
			continue
		}
		if h.count(`SELECT count(*) FROM proc_state WHERE state IN ('PENDING', 'FAILED')`) == 0 {
			return deaths
		}
		require.Positive(h.t, wait, "an open message that is not due")
		h.clk.Advance(wait)
	}
	h.t.Fatal("the stream did not settle")
	return 0
}

// TestBatch_R_H1_PoisonInABatchIsChargedAloneNeighboursEndAsAlone: a
// message that ends the process every time it is decided, in the middle of
// a batch of ten FLOPs. The first death is the batch's: nobody is charged,
// the batch's messages run one at a time, and the poison dies again alone
// — now charged, and from then on a retry that runs alone, so every later
// death is charged: DEAD(EXHAUSTED) after max-attempts charged deaths
// (max-attempts + 1 in all), and every other row — its neighbours'
// states, attempts (0), flights, events, markers — is exactly what the
// same stream leaves with pipeline.batch=1, where every death is charged.
func TestBatch_R_H1_PoisonInABatchIsChargedAloneNeighboursEndAsAlone(t *testing.T) {
	t.Parallel()
	const poison = 14
	run := func(batch int) (*harness, int) {
		h := newHarness(t, func(o *Options) { o.Batch = batch; o.MaxAttempts = 3 })
		h.run(1, schd(1, "DNLD", fltr(15, day23), fltr(16, day23), fltr(17, day23)))
		for id := int64(10); id < 20; id++ {
			h.insert(id, flopMsg(id, "STND", flopRec(15+id%3, fmt.Sprintf("<STND>%d</STND>", id))))
		}
		return h, h.runUntilSettled(poisonCtx(poison))
	}
	one, oneDeaths := run(1)
	h, deaths := run(DefaultBatch)
	require.Equal(t, 3, oneDeaths, "alone, every death is charged")
	require.Equal(t, 4, deaths, "one death more: the batch's, charged to nobody")

	r := h.proc(poison)
	require.Equal(t, StateDead, r.State)
	require.Equal(t, ClassExhausted, r.ErrorClass)
	require.Equal(t, 3, r.Attempts)
	require.Contains(t, r.Reason, "gave up after 3 attempts (last INFRA: execution by")
	for id := int64(10); id < 20; id++ {
		if id != poison {
			require.Equal(t, StateApplied, h.state(id), "message %d", id)
			require.Zero(t, h.proc(id).Attempts, "message %d was charged", id)
		}
	}
	requireSameState(t, withoutInstances(one.dumpState()), withoutInstances(h.dumpState()))
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE executing_by IS NOT NULL OR executing_through IS NOT NULL`))
}

// TestBatch_R_H1_CrashedBatchChargesNobody: a process that ends while its
// batch writes (its session cut while the batch's reference-data write
// waits for a lock; the engine abandoned) leaves one marker, on the
// batch's head, naming the batch's range. The next process charges none
// of the batch's messages, withdraws the marker, runs them one at a time
// and then batches again; every row ends exactly as with pipeline.batch=1
// and no crash.
func TestBatch_R_H1_CrashedBatchChargesNobody(t *testing.T) {
	t.Parallel()
	stream := func(h *harness) {
		for id := int64(1); id <= 6; id++ {
			h.insert(id, refMsg(id, "GLST", "ADD", glst(fmt.Sprint("G", id), "x")))
		}
	}
	one := newHarness(t, func(o *Options) { o.Batch = 1 })
	stream(one)
	one.drain()
	for id := int64(7); id <= 12; id++ {
		one.insert(id, refMsg(id, "GLST", "ADD", glst(fmt.Sprint("G", id), "y")))
	}
	one.drain()

	h := newHarness(t, func(o *Options) { o.Batch = DefaultBatch; o.MaxAttempts = 1 })
	stream(h)
	release := h.lockTable("ref_data")
	done := stepAsync(context.Background(), h.e)
	pid := h.lockWaiter()
	require.Equal(t, h.e.instance, h.markerOf(1), "the batch is marked on its head")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM proc_state WHERE executing_through = 6 AND msg_id = 1`), "with its range")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM proc_state WHERE executing_by IS NOT NULL`), "one row version for the batch")
	h.exec(`SELECT pg_terminate_backend($1)`, pid) // the process is gone mid-batch
	require.Error(t, await(t, done))
	require.Equal(t, h.e.instance, h.markerOf(1), "a dead process withdraws nothing")
	release()

	e := h.sibling()
	progressed, _, err := e.Step(context.Background())
	require.NoError(t, err)
	require.True(t, progressed)
	for id := int64(1); id <= 6; id++ {
		r := h.proc(id)
		require.Equal(t, StatePending, r.State, "message %d", id)
		require.Zero(t, r.Attempts, "message %d was charged for a crash that was not its own", id)
	}
	require.Zero(t, h.count(`SELECT count(*) FROM proc_state WHERE executing_by IS NOT NULL OR executing_through IS NOT NULL`))
	h.e = e
	h.drain()
	require.Zero(t, e.batched, "the crashed batch's messages ran one at a time")
	for id := int64(7); id <= 12; id++ {
		h.insert(id, refMsg(id, "GLST", "ADD", glst(fmt.Sprint("G", id), "y")))
	}
	h.drain()
	require.Equal(t, 6, e.batched, "past the crashed range, batches again")
	requireSameState(t, one.dumpState(), h.dumpState())
}

// TestBatch_R_H1_R_M2_HandOverMarksTheNextBatch: the transaction that
// finishes a batch marks the next head through the last message the next
// batch will take (procstate.HandOver.Ahead), so that batch runs without a
// marker of its own (R-M2) and a process that ends inside it still leaves
// the batch's range on its head: the next process charges none of its
// messages (R-H1) and every row ends as with pipeline.batch=1.
func TestBatch_R_H1_R_M2_HandOverMarksTheNextBatch(t *testing.T) {
	t.Parallel()
	stream := func(h *harness) {
		for id := int64(1); id <= 12; id++ {
			h.insert(id, refMsg(id, "GLST", "ADD", glst(fmt.Sprint("G", id), "x")))
		}
	}
	one := newHarness(t, func(o *Options) { o.Batch = 1 })
	stream(one)
	one.drain()

	h := newHarness(t, func(o *Options) { o.Batch = 6; o.MaxAttempts = 1 })
	stream(h)
	progressed, _, err := h.e.Step(context.Background())
	require.NoError(t, err)
	require.True(t, progressed)
	require.Equal(t, StateSucceeded, h.state(6), "the first batch, 1 to 6, committed")
	require.Equal(t, h.e.instance, h.markerOf(7), "its hand-over marked the next head")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM proc_state WHERE msg_id = 7 AND executing_through = 12`), "through the next batch's last message")

	release := h.lockTable("ref_data")
	done := stepAsync(context.Background(), h.e)
	pid := h.lockWaiter()
	require.Equal(t, 1, h.count(`SELECT count(*) FROM proc_state WHERE executing_by IS NOT NULL`), "no marker of the batch's own")
	h.exec(`SELECT pg_terminate_backend($1)`, pid) // the process is gone mid-batch
	require.Error(t, await(t, done))
	release()

	e := h.sibling()
	progressed, _, err = e.Step(context.Background())
	require.NoError(t, err)
	require.True(t, progressed)
	for id := int64(7); id <= 12; id++ {
		r := h.proc(id)
		require.Equal(t, StatePending, r.State, "message %d", id)
		require.Zero(t, r.Attempts, "message %d was charged for a crash that was not its own", id)
	}
	h.e = e
	h.drain()
	requireSameState(t, one.dumpState(), h.dumpState())
}
