package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/libs/lease"
	"msgexchange/libs/lifecycle"
)

// States and error classes of proc_state.
const (
	StatePending   = "PENDING"
	StateApplied   = "APPLIED"
	StateSucceeded = "SUCCEEDED"
	StateSkipped   = "SKIPPED"
	StateFailed    = "FAILED"
	StateDead      = "DEAD"

	ClassMalformed   = "MALFORMED"
	ClassCodec       = "CODEC_ERROR"
	ClassUnsupported = "UNSUPPORTED"
	ClassInfra       = "INFRA"
	ClassProtocol    = "PROTOCOL"
	ClassExhausted   = "EXHAUSTED"
)

// head is the FIFO head: the smallest unfinished mailbox ID (INV-3).
type head struct {
	MsgID               int64
	State               string
	Attempts            int
	NextAttemptAt       *time.Time
	ProcessingStartedAt *time.Time
	ErrorClass          *string
	Raw                 string
	// ExecutingBy is the instance whose execution of the message is in
	// flight (proc_state.executing_by), nil when none is (R-H1).
	ExecutingBy *string
	// ExecutingThrough is, on a head marked for a batch, the batch's last
	// message (proc_state.executing_through); nil for a single message.
	ExecutingThrough *int64
	// TraceParent and TraceState are the trace context stored when the
	// message was registered (R-I4); nil when it has none.
	TraceParent, TraceState *string
}

func (e *Engine) executorService() *lifecycle.Service {
	return lifecycle.NewService("processor-executor", nil, func(ctx context.Context) error {
		// A new term: another instance may have registered or replayed
		// messages below anything this engine knew; the head's clock runs
		// again only from the term's first step that reaches the database.
		e.floor.reset()
		e.runningSince = time.Time{}
		e.snapshots.forget(0)
		for {
			progressed, wait, err := e.Step(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				// The processor's own database is unreachable: pause without
				// burning the head's attempts, then look again.
				e.log.Warn("executing head; pausing", "err", err)
				wait = time.Second
			}
			if progressed {
				continue
			}
			if wait <= 0 || wait > 5*time.Second {
				wait = 5 * time.Second // safety net: look at the head again
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-e.wake:
			case <-t.C:
			}
			t.Stop()
		}
	}, nil)
}

// Step executes the head if it is due. It reports whether a message moved,
// and otherwise how long until the head is due.
//
// Before a head executes, proc_state.executing_by names this engine's
// instance (R-H1). The marker is normally written, for the next head, by
// the transaction that finishes the previous one (markNext), so the normal
// path commits nothing extra; only a head that no such transaction marked
// — the first one after a start, after idle or after a backoff — gets a
// transaction of its own (markHead). A head found carrying another
// instance's marker was being executed when that instance's process ended
// (panic outside the handler, out-of-memory kill, liveness kill, SIGKILL):
// that execution counts as a failed attempt, with backoff and max-attempts
// like any other (recordCrash).
func (e *Engine) Step(ctx context.Context) (progressed bool, wait time.Duration, err error) {
	defer func() {
		if err != nil {
			// The database did not answer, or the term is over: no message
			// could run, so the head's clock stops (R-L2).
			e.runningSince = time.Time{}
		}
	}()
	if _, err := e.applyReplays(ctx); err != nil { // operators' replays first (R-F1)
		return false, time.Second, err
	}
	heads, err := e.loadHeads(ctx, e.batchSize())
	if err != nil {
		return false, time.Second, err // the database is unreachable: pause, burn nothing
	}
	if len(heads) == 0 {
		return false, 0, nil
	}
	h := heads[0]
	if h.ExecutingBy != nil && *h.ExecutingBy != e.instance {
		forgiven, err := e.crashedRun(ctx, h)
		if err != nil || forgiven {
			return e.settle(ctx, h, err)
		}
		return e.settle(ctx, h, e.recordCrash(ctx, h))
	}
	now := e.clock.Now()
	if e.runningSince.IsZero() {
		e.runningSince = now
	}
	if h.State == StateFailed && h.NextAttemptAt != nil && h.NextAttemptAt.After(now) {
		return false, h.NextAttemptAt.Sub(now), nil
	}
	// Poison: too many attempts, or stuck too long at the head (R-B5).
	if h.Attempts >= e.opt.MaxAttempts {
		return e.settle(ctx, h, e.finishNonBusiness(ctx, h.MsgID, nil, StateDead, ClassExhausted,
			fmt.Sprintf("gave up after %d attempts (last: %s)", h.Attempts, deref(h.ErrorClass))))
	}
	if e.headExpired(h, now) {
		return e.settle(ctx, h, e.finishNonBusiness(ctx, h.MsgID, nil, StateDead, ClassExhausted,
			fmt.Sprintf("head for longer than %s (last: %s)", e.opt.HeadDeadline, deref(h.ErrorClass))))
	}
	if len(heads) > 1 && h.MsgID > e.singleUntil {
		if progressed, ran, err := e.stepBatch(ctx, heads); ran {
			return progressed, 0, err
		}
	}
	if h.ExecutingBy == nil {
		if err := e.markHead(ctx, h.MsgID); err != nil {
			return e.settle(ctx, h, err)
		}
	}
	start := time.Now()
	ectx, x := e.startExecution(ctx, h) // the message's trace continues here (R-I4)
	err = e.execute(ectx, h)
	x.end(err)
	e.metrics.duration.Record(ctx, time.Since(start).Seconds())
	if err != nil && ctx.Err() != nil {
		// Stopping, not failing: withdraw the marker so that the next
		// start does not count this execution as one that ended the
		// process. A term that lost its lease cannot write it any more;
		// the next holder then counts the attempt.
		e.unmark(ctx, h.MsgID)
		return false, 0, err
	}
	var fail *failure
	if errors.As(err, &fail) {
		return e.settle(ctx, h, e.recordFailure(ctx, h, fail.class, fail.reason))
	}
	if err != nil && !isOutage(err) && !errors.Is(err, ErrNotOpen) && !errors.Is(err, lease.ErrFenced) {
		// An error inside the transaction that is not a domain outcome and
		// not an outage: the attempt counts, with backoff (R-B3 INFRA).
		err = e.recordFailure(ctx, h, ClassInfra, err.Error())
	}
	return e.settle(ctx, h, err)
}

// settle turns the result of a write of the executor into Step's result.
func (e *Engine) settle(ctx context.Context, h *head, err error) (bool, time.Duration, error) {
	switch {
	case err == nil:
		return true, 0, nil
	case ctx.Err() != nil, errors.Is(err, lease.ErrFenced):
		// Stopping, or the term is over (R-H6): nothing more is written.
		return false, 0, err
	case errors.Is(err, ErrNotOpen):
		// An operator ended the message while it executed (R-H3): its
		// transaction rolled back, the operator's outcome stands, and the
		// pipeline moves on without recording a failure.
		e.log.Info("message was finished elsewhere while executing; its execution is discarded",
			"msg_id", h.MsgID, "err", err)
		return true, 0, nil
	case isOutage(err):
		// The processor's own database is unreachable: that says nothing
		// about the message, so no attempt is burnt; the pipeline pauses
		// and the head is tried again (R-B3).
		return false, time.Second, err
	}
	return false, time.Second, err
}

// headExpired reports whether h has been at the head for head-deadline
// (R-B5) — counting only time in which it could run (R-L2): from its
// processing start, or from when this engine last began to be able to run
// the head (its term's first step, the first step after the database came
// back), whichever is later. An outage of PostgreSQL or of the lease, and
// a lease handover, never spend a healthy head's deadline: after any of
// them the head gets head-deadline again, while its attempts still bound a
// message that keeps failing.
func (e *Engine) headExpired(h *head, now time.Time) bool {
	if h.ProcessingStartedAt == nil {
		return false
	}
	from := *h.ProcessingStartedAt
	if e.runningSince.After(from) {
		from = e.runningSince
	}
	return now.Sub(from) >= e.opt.HeadDeadline
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// headsSQL reads the first $1 open messages at or above the floor $2.
const headsSQL = `
	SELECT msg_id, state, attempts, next_attempt_at, processing_started_at, error_class, raw, executing_by, executing_through,
		trace_parent, trace_state
	FROM proc_state WHERE state IN ('PENDING', 'FAILED') AND msg_id >= $2 ORDER BY msg_id LIMIT $1`

// loadHeads returns up to n open messages from the FIFO head, in order,
// reading from the head floor (floor.go) and raising it to the head. It
// keeps the floor's generation for the raises of the writes that follow.
func (e *Engine) loadHeads(ctx context.Context, n int) ([]*head, error) {
	floor, gen := e.floor.read()
	e.floorGen = gen
	rows, err := e.pool.Query(ctx, headsSQL, n, floor)
	if err != nil {
		return nil, fmt.Errorf("loading FIFO head: %w", err)
	}
	heads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*head, error) {
		var h head
		err := r.Scan(&h.MsgID, &h.State, &h.Attempts, &h.NextAttemptAt, &h.ProcessingStartedAt, &h.ErrorClass, &h.Raw, &h.ExecutingBy, &h.ExecutingThrough, &h.TraceParent, &h.TraceState)
		return &h, err
	})
	if err != nil {
		return nil, fmt.Errorf("loading FIFO head: %w", err)
	}
	if len(heads) > 0 {
		e.floor.raise(heads[0].MsgID, gen)
	}
	return heads, nil
}

// crashedRun handles a head carrying another instance's marker for a
// batch (executing_through past the head; or, as an older release marked a
// batch, several messages carrying that marker): the instance died inside
// a batch (batch.go), and which message, if any, ended it is unknown.
// Counting an attempt for each would charge innocent neighbours, and at
// max-attempts crashes exhaust them all; so none is counted, the marker is
// withdrawn, and the messages up to the batch's last run one at a time
// (singleUntil). If one of them ends the process again, it is then the
// only one marked, and the next start counts that crash against it alone
// (recordCrash); from then on it is a retry, which always runs alone
// (prepareBatch), so each later crash is counted too. The price is one
// crash more before a poison message of a batch is charged: it ends
// DEAD(EXHAUSTED) after max-attempts + 1 process deaths. It reports
// whether it handled the run; a single message's marker is left to
// recordCrash.
func (e *Engine) crashedRun(ctx context.Context, h *head) (bool, error) {
	by := *h.ExecutingBy
	last := h.MsgID
	if h.ExecutingThrough != nil {
		last = max(last, *h.ExecutingThrough)
	}
	var n int
	var marked int64
	err := e.pool.QueryRow(ctx, `SELECT count(*), COALESCE(max(msg_id), 0) FROM proc_state
		WHERE state IN ('PENDING', 'FAILED') AND executing_by = $1 AND msg_id >= $2`, by, h.MsgID).Scan(&n, &marked)
	if err != nil {
		return false, fmt.Errorf("reading crashed batch: %w", err)
	}
	if last == h.MsgID && n <= 1 {
		return false, nil
	}
	last = max(last, marked)
	if _, err := e.exec(ctx, `UPDATE proc_state SET executing_by = NULL, executing_through = NULL
		WHERE state IN ('PENDING', 'FAILED') AND executing_by = $1 AND msg_id >= $2`, by, h.MsgID); err != nil {
		return false, fmt.Errorf("withdrawing markers of a crashed batch: %w", err)
	}
	e.singleUntil = max(e.singleUntil, last)
	e.metrics.crashed.Add(ctx, 1)
	e.log.Error("a batch's execution ended its process; its messages run one at a time, a crash of one of them is counted against it",
		"executing_by", clip.N(by, 256), "first_msg_id", h.MsgID, "last_msg_id", last, "alert", "processor-crashed-execution")
	return true, nil
}

// markHead writes this instance's execution marker on a head that no
// finishing transaction marked, and its processing start if it has none,
// in a transaction of its own, before the head executes (R-H1). It is not
// synchronously committed: the marker guards against the death of the
// processor, not of PostgreSQL, and any later synchronous commit (the
// execution's outcome) makes it durable with itself. A PostgreSQL crash
// that loses it also ends the execution it announced, which then counts
// as an outage, not an attempt.
func (e *Engine) markHead(ctx context.Context, msgID int64) error {
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit TO off`); err != nil {
			return fmt.Errorf("relaxing marker commit: %w", err)
		}
		var marked bool
		err := tx.QueryRow(ctx, `
			WITH m AS (
				UPDATE proc_state SET executing_by = CASE WHEN msg_id = $1 THEN $2 END, executing_through = NULL,
					processing_started_at = CASE WHEN msg_id = $1 THEN COALESCE(processing_started_at, $3) ELSE processing_started_at END
				WHERE msg_id = ANY (ARRAY[$1::bigint, $4::bigint]) AND (msg_id <> $1 OR state IN ('PENDING', 'FAILED'))
				RETURNING msg_id, executing_by)
			SELECT EXISTS (SELECT 1 FROM m WHERE executing_by IS NOT NULL)`,
			msgID, e.instance, e.clock.Now(), e.marked).Scan(&marked)
		if err != nil {
			return fmt.Errorf("marking head %d executing: %w", msgID, err)
		}
		if !marked {
			return fmt.Errorf("marking head %d executing: %w", msgID, ErrNotOpen)
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.marked = msgID
	return nil
}

// markNextSQL moves this instance's marker ($2; its previous one on $4)
// from $1 to the head at or above the floor $5 if it is due at $3. The
// rows are named by one array, an index condition on the primary key: an
// OR of "IN (…)" lists would make the planner scan the whole table.
const markNextSQL = `
	WITH nxt AS (
		SELECT msg_id FROM proc_state WHERE state IN ('PENDING', 'FAILED') AND msg_id >= $5 ORDER BY msg_id LIMIT 1
	), due AS (
		SELECT p.msg_id FROM proc_state p JOIN nxt USING (msg_id)
		WHERE p.state = 'PENDING' OR p.next_attempt_at <= $3
	)
	UPDATE proc_state p SET
		executing_by = CASE WHEN p.msg_id IN (SELECT msg_id FROM due) THEN $2 END, executing_through = NULL,
		processing_started_at = CASE WHEN p.msg_id IN (SELECT msg_id FROM due)
			THEN COALESCE(p.processing_started_at, $3) ELSE p.processing_started_at END
	WHERE p.msg_id = ANY (ARRAY[$1::bigint, $4::bigint] || ARRAY(SELECT msg_id FROM due))
	RETURNING p.msg_id, p.executing_by IS NOT NULL, p.state IN ('PENDING', 'FAILED')`

// markNext hands the execution marker, inside a transaction that finished
// (or moved) msgID, to the head that follows — the smallest open message,
// if it is due now — and sets its processing start if it has none (R-H1).
// It clears this instance's previous marker. It reports the message it
// marked (0 for none) and whether msgID itself is still open.
func (e *Engine) markNext(ctx context.Context, tx pgx.Tx, msgID int64) (next int64, open bool, err error) {
	floor, _ := e.floor.read()
	rows, err := tx.Query(ctx, markNextSQL,
		msgID, e.instance, e.clock.Now(), e.marked, floor)
	if err != nil {
		return 0, false, fmt.Errorf("marking next head: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var marked, isOpen bool
		if err := rows.Scan(&id, &marked, &isOpen); err != nil {
			return 0, false, fmt.Errorf("marking next head: %w", err)
		}
		if marked {
			next = id
		}
		if id == msgID {
			open = isOpen
		}
	}
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("marking next head: %w", err)
	}
	return next, open, nil
}

// finishTx runs fn — a write that finishes msgID or moves it on — in a
// fenced transaction that ends with markNext, so the next head is marked
// without a commit of its own. When fn reports that it kept msgID open (a
// snapshot batch), msgID must still be open at the end — an operator may
// have ended it meanwhile (R-H3) — or the transaction rolls back with
// ErrNotOpen.
func (e *Engine) finishTx(ctx context.Context, msgID int64, fn func(pgx.Tx) (keptOpen bool, err error)) error {
	var next int64
	var closed bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		keptOpen, err := fn(tx)
		if err != nil {
			return err
		}
		n, open, err := e.markNext(ctx, tx, msgID)
		if err != nil {
			return err
		}
		if keptOpen && !open {
			return fmt.Errorf("continuing %d: %w", msgID, ErrNotOpen)
		}
		next, closed = n, !open
		return nil
	})
	if err == nil {
		e.marked = next
		if closed {
			// msgID was the head: nothing below it is open.
			e.floor.raise(msgID+1, e.floorGen)
		}
	}
	return err
}

// unmark withdraws this instance's marker from msgID after an execution
// that was cut short by stopping, not by a failure of the message. It is
// best effort and bounded: a marker left behind costs the message one
// attempt at the next start.
func (e *Engine) unmark(ctx context.Context, msgID int64) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := e.exec(uctx, `UPDATE proc_state SET executing_by = NULL, executing_through = NULL WHERE msg_id = $1 AND executing_by = $2`, msgID, e.instance)
	if err != nil {
		e.log.Warn("withdrawing execution marker on stop; the next start counts the attempt", "msg_id", msgID, "err", err)
		return
	}
	e.marked = 0
}

// recordCrash counts the execution of h that another instance announced
// and never finished: its process ended while it ran (R-H1).
func (e *Engine) recordCrash(ctx context.Context, h *head) error {
	e.metrics.crashed.Add(ctx, 1)
	reason := fmt.Sprintf("execution by %s ended its process before recording an outcome (panic outside the handler, out-of-memory, liveness kill or SIGKILL)",
		clip.N(*h.ExecutingBy, 256))
	e.log.Error("previous execution of the head ended its process; counted as a failed attempt",
		"msg_id", h.MsgID, "executing_by", clip.N(*h.ExecutingBy, 256), "attempt", h.Attempts+1, "max_attempts", e.opt.MaxAttempts,
		"alert", "processor-crashed-execution")
	return e.recordFailure(ctx, h, ClassInfra, reason)
}

// failure is a retryable outcome of an execution.
type failure struct {
	class, reason string
}

func (f *failure) Error() string { return f.class + ": " + f.reason }

// recordFailure moves the head to FAILED with backoff, or to
// DEAD(EXHAUSTED) when this was its last allowed attempt; it withdraws the
// head's execution marker in the same transaction, so a failure is counted
// once. A head an operator ended meanwhile is left as it is (ErrNotOpen).
func (e *Engine) recordFailure(ctx context.Context, h *head, class, reason string) error {
	attempts := h.Attempts + 1
	reason = clip.Text(reason)
	if attempts >= e.opt.MaxAttempts {
		err := e.finishTx(ctx, h.MsgID, func(tx pgx.Tx) (bool, error) {
			if _, err := tx.Exec(ctx, `UPDATE proc_state SET attempts=$2 WHERE msg_id=$1 AND state IN ('PENDING', 'FAILED')`, h.MsgID, attempts); err != nil {
				return false, fmt.Errorf("recording attempt: %w", err)
			}
			return false, e.finishIn(ctx, tx, h.MsgID, nil, StateDead, ClassExhausted,
				fmt.Sprintf("gave up after %d attempts (last %s: %s)", attempts, class, reason))
		})
		if err == nil {
			e.metrics.failed.Add(ctx, 1, classAttr(class))
		}
		return err
	}
	now := e.clock.Now()
	next := now.Add(e.backoff(attempts))
	err := e.finishTx(ctx, h.MsgID, func(tx pgx.Tx) (bool, error) {
		tag, err := tx.Exec(ctx, `
			UPDATE proc_state SET state='FAILED', error_class=$2, reason=$3, attempts=$4, next_attempt_at=$5, updated_at=$6,
				processing_started_at=COALESCE(processing_started_at, $6)
			WHERE msg_id=$1 AND state IN ('PENDING', 'FAILED')`, h.MsgID, class, reason, attempts, next, now)
		if err != nil {
			return false, fmt.Errorf("recording failure: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return false, fmt.Errorf("recording failure of %d: %w", h.MsgID, ErrNotOpen)
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	e.metrics.failed.Add(ctx, 1, classAttr(class))
	e.log.Warn("message failed; will retry", "msg_id", h.MsgID, "class", class, "reason", reason, "attempt", attempts, "next_attempt_at", next)
	return nil
}

// metaCols are the META values written with a state transition.
type metaCols struct {
	SNDR, TYPE, STYP, SEQN, DTTM string
}

// finishNonBusiness writes a terminal state that touches no business table
// (DEAD, SKIPPED) together with its backfill intent in one statement
// (INV-8), and hands the execution marker to the next head.
func (e *Engine) finishNonBusiness(ctx context.Context, msgID int64, meta *metaCols, state, class, reason string) error {
	return e.finishTx(ctx, msgID, func(tx pgx.Tx) (bool, error) {
		return false, e.finishIn(ctx, tx, msgID, meta, state, class, reason)
	})
}

// finishIn writes a terminal state inside a given transaction: the outbox
// row for the mailbox marker is inserted by the same statement that makes
// the state terminal (INV-8). The reason, often quoting the message, is
// clipped (R-H2). A message that ends DEAD or SKIPPED applied nothing, so
// it gives up the identity it bound in this transaction (R-K3): a forged
// or rejected message never suppresses the genuine one that comes later.
func (e *Engine) finishIn(ctx context.Context, q querier, msgID int64, meta *metaCols, state, class, reason string) error {
	now := e.clock.Now()
	var m metaCols
	if meta != nil {
		m = *meta
	}
	var cls *string
	if class != "" {
		cls = &class
	}
	reason = clip.Text(reason)
	tag, err := q.Exec(ctx, `
		WITH u AS (
			UPDATE proc_state SET state=$2, error_class=$3, reason=$4, finished_at=$5, updated_at=$5,
				next_attempt_at=NULL, executing_by=NULL, executing_through=NULL,
				identity_key=CASE WHEN $2 IN ('DEAD', 'SKIPPED') THEN NULL ELSE identity_key END,
				sndr=COALESCE(NULLIF($6, ''), sndr), msg_type=COALESCE(NULLIF($7, ''), msg_type),
				msg_styp=COALESCE(NULLIF($8, ''), msg_styp), seqn=COALESCE(NULLIF($9, ''), seqn),
				dttm=COALESCE(NULLIF($10, ''), dttm)
			WHERE msg_id=$1 AND state IN ('PENDING', 'FAILED', 'APPLIED')
			RETURNING msg_id)
		INSERT INTO outbox (target, pkey, msg_id, next_attempt_at, created_at)
		SELECT 'mailbox', msg_id::text, msg_id, $5, $5 FROM u`,
		msgID, state, cls, reason, now, m.SNDR, m.TYPE, m.STYP, m.SEQN, m.DTTM)
	if err != nil {
		return fmt.Errorf("writing terminal state %s: %w", state, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("writing terminal state %s for %d: %w", state, msgID, ErrNotOpen)
	}
	e.metrics.finished.Add(ctx, 1, stateAttr(state))
	if state == StateDead {
		e.reportDead(ctx, msgID, class, reason, flightAttrs(ctx)...)
		return nil
	}
	e.log.InfoContext(ctx, "message finished", append([]any{"msg_id", msgID, "state", state, "class", class, "reason", reason}, flightAttrs(ctx)...)...)
	return nil
}

// guard runs one stage of handling message msgID (decoding, classifying,
// handling) and turns a panic inside it into that message's failure: an
// INFRA *failure whose reason holds the panic value and a short stack, so
// the message is retried with backoff and ends DEAD(EXHAUSTED) if it keeps
// panicking, while the pipeline goes on (R-H1). Only these stages are
// guarded: a panic in the executor's own loop or database code still
// crashes the process, loudly, and the crash is then counted by the next
// start through the execution marker.
func (e *Engine) guard(ctx context.Context, msgID int64, stage string, fn func() error) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		value := clip.N(fmt.Sprint(v), 512)
		stack := panicStack()
		e.metrics.panics.Add(ctx, 1)
		e.log.Error("panic while handling a message; recorded as its failure", "msg_id", msgID, "stage", stage,
			"panic", value, "stack", stack, "alert", "processor-handler-panic")
		err = &failure{class: ClassInfra, reason: clip.Text(fmt.Sprintf("panic while %s: %s (at %s)", stage, value, stack))}
	}()
	if hook, ok := ctx.Value(stageHookKey{}).(stageHook); ok {
		hook(stage, msgID)
	}
	return fn()
}

// stageHook runs at the start of each guarded stage, inside the guard, when
// the context carries one: tests use it to make a stage panic. Production
// contexts carry none; the cost is one context lookup per stage.
type stageHook func(stage string, msgID int64)

// stageHookKey is the context key of a stageHook.
type stageHookKey struct{}

// panicStackFrames is how many frames of a panicking stack a reason keeps.
const panicStackFrames = 8

// panicStack summarises the stack of a panic being recovered — called from
// the deferred function — as "function (file:line)" frames, innermost
// first, without the runtime's own frames.
func panicStack() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs) // skip Callers, panicStack and the deferred function
	frames := runtime.CallersFrames(pcs[:n])
	var parts []string
	for len(parts) < panicStackFrames {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") && f.Function != "" {
			fn := f.Function
			if i := strings.LastIndex(fn, "/"); i >= 0 {
				fn = fn[i+1:]
			}
			parts = append(parts, fmt.Sprintf("%s (%s:%d)", fn, filepath.Base(f.File), f.Line))
		}
		if !more {
			break
		}
	}
	return strings.Join(parts, " < ")
}
