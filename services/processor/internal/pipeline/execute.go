package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"msgexchange/services/internal/procstate"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/decide"
)

// execute runs one message of a kind with its own transaction rules (see
// handle), decoded by prepareBatch. Domain outcomes are written here; a
// returned *failure is retryable; any other error is an infrastructure
// failure. Handling runs inside guard: a panic there is this message's
// failure (R-H1), its transaction rolls back, and the pipeline goes on.
func (e *Engine) execute(ctx context.Context, m *batchMsg) error {
	h, msg, meta, cls := m.h, m.msg, m.meta, m.cls
	src := Source{MsgID: h.MsgID, Type: msg.Meta.TYPE, Subtype: msg.Meta.STYP, Sender: msg.Meta.SNDR, Seqn: msg.Meta.SEQN}
	var retry *failure
	err := e.finishTx(ctx, h.MsgID, func(tx pgx.Tx) (bool, error) {
		if dup, err := e.bindIdentity(ctx, tx, h.MsgID, cls.IdentityKey); err != nil {
			return false, err
		} else if dup != 0 {
			return false, e.finishIn(ctx, tx, h.MsgID, meta, StateSkipped, "", fmt.Sprintf("duplicate-of:%d", dup))
		}
		sp, err := tx.Begin(ctx) // savepoint: a rejected message keeps nothing but its terminal state
		if err != nil {
			return false, fmt.Errorf("opening savepoint: %w", err)
		}
		w := newTxWriter(ctx, sp, h.MsgID, src, e.clock.Now(), e.zone())
		var out decide.Outcome
		herr := e.guard(ctx, h.MsgID, "handling", func() (err error) {
			out, err = e.handle(ctx, w, msg, cls)
			if err == nil && out.Continue == "" {
				err = w.FlushMasters(ctx) // code-share masters of what the handler changed (INV-22)
			}
			return err
		})
		out, herr = decide.Judge(out, herr, w.Projections())
		if herr != nil {
			// A panic (retried), or an error of the transaction.
			var f *failure
			if errors.As(herr, &f) {
				retry = f
			}
			return false, herr
		}
		switch out.Kind {
		case decide.Continued:
			// One batch of a large package (R-C6): commit it and leave the
			// message open; the next step goes on with it.
			if err := sp.Commit(ctx); err != nil {
				return false, fmt.Errorf("releasing savepoint: %w", err)
			}
			e.log.Info("snapshot batch committed", "msg_id", h.MsgID, "progress", out.Continue)
			return true, nil
		case decide.Rejected:
			_ = sp.Rollback(ctx)
			return false, e.finishIn(ctx, tx, h.MsgID, meta, StateDead, out.Class, out.Note)
		case decide.Skipped:
			_ = sp.Rollback(ctx)
			return false, e.finishIn(ctx, tx, h.MsgID, meta, StateSkipped, "", out.Note)
		case decide.Parked:
			_ = sp.Rollback(ctx)
			return false, e.parkIn(ctx, tx, h.MsgID, meta, out.Class, out.Note)
		case decide.Retry:
			retry = &failure{class: out.Class, reason: out.Note}
			return false, retry
		}
		if err := sp.Commit(ctx); err != nil {
			return false, fmt.Errorf("releasing savepoint: %w", err)
		}
		if out.Kind == decide.Applied {
			return false, e.markApplied(ctx, tx, h.MsgID, meta, out.Note)
		}
		return false, e.finishIn(ctx, tx, h.MsgID, meta, StateSucceeded, "", out.Note)
	})
	if retry != nil {
		return retry
	}
	return err
}

// read decodes and classifies h's message, each under the panic guard.
func (e *Engine) read(ctx context.Context, h *head) reading {
	var r reading
	if strings.TrimSpace(h.Raw) == "" {
		r.state, r.class, r.reason = StateDead, ClassMalformed, "raw message missing"
		return r
	}
	if kept, ok := e.snapshots.reading(h.MsgID, h.Raw); ok {
		return kept // a snapshot's later step (R-K4)
	}
	e.decodes.Add(1)
	if err := e.guard(ctx, h.MsgID, "decoding", func() (err error) {
		r.msg, err = sis.DecodeText(h.Raw)
		return err
	}); err != nil {
		var de *sis.Error
		switch {
		case errors.As(err, &r.retry):
		case errors.As(err, &de) && de.Class == sis.ClassCodec:
			// The codec refuses it the same way at every attempt (R-K2).
			r.state, r.class, r.reason, r.parked = StateDead, ClassCodec, err.Error(), true
		default:
			r.state, r.class, r.reason = StateDead, ClassMalformed, err.Error()
		}
		return r
	}
	m := r.msg.Meta
	r.meta = &metaCols{SNDR: m.SNDR, TYPE: m.TYPE, STYP: m.STYP, SEQN: m.SEQN, DTTM: m.DTTM}
	if e.opt.IgnoreTypes[m.TYPE] {
		r.state, r.reason = StateSkipped, "ignored type "+m.TYPE+" (pipeline.ignore-types)"
		return r
	}
	if err := e.guard(ctx, h.MsgID, "classifying", func() (err error) {
		r.cls, err = sis.Classify(r.msg, sis.IdentityOptions{IncludeDayBoundary: e.opt.IncludeDayBoundary})
		return err
	}); err != nil {
		var de *sis.Error
		switch {
		case errors.As(err, &r.retry):
		case errors.As(err, &de) && de.Class == sis.ClassMalformed:
			r.state, r.class, r.reason = StateDead, ClassMalformed, err.Error()
		default:
			r.state, r.class, r.reason, r.parked = StateDead, ClassUnsupported, err.Error(), true
		}
		return r
	}
	if n, limit := sis.Records(r.msg), e.maxRecords(); n > limit {
		r.state, r.class = StateDead, ClassMalformed
		r.reason = fmt.Sprintf("the message carries %d records, more than pipeline.max-records (%d)", n, limit)
		return r
	}
	if r.cls.Kind == sis.KindFlightSnapshot {
		e.snapshots.keep(h.MsgID, h.Raw, r)
	}
	return r
}

// bindIdentity binds the identity key to msgID in the message's own
// transaction (R-B4). It returns the other message holding the key, if any;
// a retry of the same message finds its own binding and is no duplicate.
// The binding commits only with an applied outcome: finishIn withdraws it
// when the message ends DEAD or SKIPPED (R-K3).
func (e *Engine) bindIdentity(ctx context.Context, tx pgx.Tx, msgID int64, key string) (int64, error) {
	var other int64
	err := tx.QueryRow(ctx, `SELECT msg_id FROM proc_state WHERE identity_key=$1 AND msg_id<>$2`, key, msgID).Scan(&other)
	if err == nil {
		return other, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("looking up identity: %w", err)
	}
	if err := procstate.WriteBinds(ctx, tx, procstate.Bind{MsgID: msgID, Key: key}); err != nil {
		return 0, err
	}
	return 0, nil
}

// markApplied records that the business change is committed but Redis
// writes are outstanding (INV-23); no backfill intent yet. APPLIED is
// decided under the message's row lock, in a statement that starts once the
// lock is held (R-H4): an ack transaction that removed the message's last
// pending projection holds the same row until it commits, so this decision
// sees its deletion, and a message with nothing pending any more — a
// snapshot's last batch that wrote nothing while its earlier batches were
// acknowledged — is finished SUCCEEDED with its backfill intent instead of
// being left APPLIED where no ack would reach it.
func (e *Engine) markApplied(ctx context.Context, tx pgx.Tx, msgID int64, m *metaCols, note string) error {
	now := e.clock.Now()
	b := &pgx.Batch{}
	var state string
	var locked bool
	var lockErr error
	b.Queue(`SELECT state FROM proc_state WHERE msg_id=$1 FOR NO KEY UPDATE`, msgID).QueryRow(func(r pgx.Row) error {
		locked, lockErr = true, r.Scan(&state)
		return nil
	})
	var moved []procstate.AppliedAt
	procstate.QueueApply(b, []procstate.Apply{{MsgID: msgID, Note: note, At: now, Meta: *m}}, func(a []procstate.AppliedAt) error {
		moved = a
		return nil
	})
	err := tx.SendBatch(ctx, b).Close()
	switch {
	case !locked:
		return fmt.Errorf("locking message %d: %w", msgID, err)
	case errors.Is(lockErr, pgx.ErrNoRows):
		return fmt.Errorf("marking %d applied: %w", msgID, ErrNotOpen)
	case lockErr != nil:
		return fmt.Errorf("locking message %d: %w", msgID, lockErr)
	case state != StatePending && state != StateFailed:
		return fmt.Errorf("marking %d applied: %w", msgID, ErrNotOpen)
	case err != nil:
		return err
	}
	if len(moved) == 0 {
		// Open, and every projection it wrote is acknowledged already.
		return e.finishIn(ctx, tx, msgID, m, StateSucceeded, "", note)
	}
	registered := moved[0].Registered
	runHook(ctx, hookApplied, tx, msgID)
	e.metrics.finished.Add(ctx, 1, stateAttr(StateApplied))
	e.metrics.stage(ctx, StageApplied, &registered, now)
	e.log.InfoContext(ctx, "message applied", append([]any{"msg_id", msgID, "type", m.TYPE, "styp", m.STYP}, flightAttrs(ctx)...)...)
	return nil
}

// handle routes a message of a kind with its own transaction rules (daily
// snapshots, season schedules, answers to requests) to its decide handler
// with views and sinks over the message's transaction. Every kind
// decide.Handles runs as a batch (batch.go), one message being a batch of
// one, and never reaches here.
func (e *Engine) handle(ctx context.Context, w *writer, msg *sis.Message, cls sis.Classification) (decide.Outcome, error) {
	if decide.Handles(msg, cls) {
		return decide.Outcome{}, fmt.Errorf("%s/%s (%s) is decided as a batch, not by execute", msg.Meta.TYPE, msg.Meta.STYP, cls.Kind)
	}
	styp := msg.Meta.STYP
	switch cls.Kind {
	case sis.KindFlightSnapshot:
		if styp == "RESP" {
			// R-C7: a schedule response is applied only as the answer to an
			// open RQFD request (requests.go); otherwise SKIPPED.
			return e.scheduleResponse(ctx, w, msg)
		}
		return e.snapshot(ctx, w, msg)
	case sis.KindSeasonSchedule:
		return e.season(ctx, w, msg)
	case sis.KindReference:
		return e.referenceResponse(ctx, w, msg)
	}
	return decide.Outcome{}, &decide.Unsupported{Reason: fmt.Sprintf("no handler for %s/%s (%s)", msg.Meta.TYPE, styp, cls.Kind)}
}
