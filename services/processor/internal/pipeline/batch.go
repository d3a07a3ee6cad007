package pipeline

// What the executor does per batch (pipeline.batch > 1, R-J1). The one
// message path (Step → execute) stays the reference: a batch is a run of
// consecutive due heads whose outcome is, message by message, what that
// path gives, written in one fenced transaction instead of one each.
//
//  1. prepare (no database): up to pipeline.batch open messages from the
//     head, in msg_id order. Each is decoded and classified under the
//     panic guard. Raw missing or MALFORMED, an ignored TYPE, a codec
//     refusal (CODEC_ERROR) and an UNSUPPORTED classification are terminal
//     outcomes decided here (the last two parked, R-K2), like
//     the one message path decides them before any write. A head that
//     failed before (a retry) runs alone, so that a crash during it is
//     its own. The batch ends before the first message that is FAILED,
//     carries an execution marker of its own, is at its limits (attempts,
//     head deadline), whose decoding needs a retry (a panic),
//     or that decide does not handle (daily snapshots with their own
//     batch rules R-C6, season schedules, answers to requests): that
//     message becomes the next head and runs alone.
//  2. mark (R-H1): one small statement, not synchronously committed,
//     marks the batch on its head: executing_by names this instance,
//     executing_through the batch's last message. A process that dies
//     before the batch commits leaves that marker; see crashedRun for how
//     the next start treats it (nobody is charged, the range runs one at
//     a time).
//  3. one fenced transaction: lock the batch's proc_state rows, load the
//     identity holders of their keys and every flight the messages name
//     with its code-share children (one pipelined round trip); then decide
//     each message in order against an overlay (apply.Overlay) — the
//     loaded rows plus the changes of the batch's earlier messages —
//     binding its identity first
//     (a key held by another message, in the database or earlier in the
//     batch, is SKIPPED duplicate-of, R-B4). A rejection, a skip or an
//     unsupported outcome rolls the overlay back to where the message
//     started (the savepoint of the one message path) and keeps only its
//     terminal state, without the identity: a message that applied nothing
//     reserves no key (R-K3). A retryable failure (or a panic) of a handler ends
//     the batch before that message: the overlay is rolled back to it and
//     it runs alone next, where its attempt is counted with backoff.
//  4. write, pipelined in one round trip: the decision's statements,
//     queued by apply (Overlay.Queue) — each changed flight once at its
//     last state, every outbox row in decision order (flight-state, msg,
//     schd per change, the mailbox intent of each terminal state),
//     pending projections, reference-data writes in order — then the
//     FIFO head's own: terminal states and APPLIED states with their
//     identity bindings (one row version per message), and the marker
//     handed to the next head (markNext), which also clears the batch's.
//
// A statement that fails rolls the whole batch back; the executor then
// runs the messages of that batch one at a time (singleUntil), so the
// culprit is found and charged alone.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/libs/lease"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/apply"
	"msgexchange/services/processor/internal/decide"
)

// DefaultBatch is pipeline.batch when Options.Batch is 0 in the service's
// configuration (chosen by measurement, docs/performance.md R-J1).
const DefaultBatch = 256

// batchSize is the configured batch; 0 or 1 is one message per
// transaction.
func (e *Engine) batchSize() int {
	return max(e.opt.Batch, 1)
}

// batchMsg is one message of a batch and what was decided for it.
type batchMsg struct {
	h    *head
	ctx  context.Context
	x    *execution
	msg  *sis.Message
	cls  sis.Classification
	meta *metaCols
	// decided before any write (prepare) or by decide.
	state, class, reason string
	now                  time.Time
	parked               bool // DEAD(UNSUPPORTED): counted as a failure too
	registered           *time.Time
}

// errBatchEmpty ends a batch transaction that decided nothing: its first
// message runs alone.
var errBatchEmpty = errors.New("batch decided no message")

// errBatchChanged ends a batch whose messages changed meanwhile (an
// operator ended one): the one message path handles the head.
var errBatchChanged = errors.New("batch messages changed while it was prepared")

// stepBatch runs a batch from heads (loaded in msg_id order, the head due
// and not poisoned). ok is false when no batch was run and the one
// message path should handle the head.
func (e *Engine) stepBatch(ctx context.Context, heads []*head) (progressed bool, ok bool, err error) {
	msgs := e.prepareBatch(ctx, heads)
	if len(msgs) < 2 {
		for _, m := range msgs {
			m.x.end(errBatchEmpty)
		}
		return false, false, nil // one message: the one message path is the same and simpler
	}
	endAll := func(err error) {
		for _, m := range msgs {
			m.x.end(err)
		}
	}
	start := time.Now()
	if err := e.markBatch(ctx, msgs); err != nil {
		endAll(err)
		if errors.Is(err, errBatchChanged) {
			return false, false, nil
		}
		p, _, err := e.settle(ctx, heads[0], err)
		return p, true, err
	}
	done, next, err := e.writeBatch(ctx, msgs)
	if err != nil {
		endAll(err)
		switch {
		case ctx.Err() != nil:
			e.unmarkBatch(ctx, msgs)
			return false, true, err
		case errors.Is(err, lease.ErrFenced), isOutage(err):
			p, _, err := e.settle(ctx, heads[0], err)
			return p, true, err
		}
		// The markers of the batch are withdrawn, so that the messages
		// run next as if the batch had not been tried.
		if rerr := e.restoreMarks(ctx, msgs); rerr != nil {
			p, _, err := e.settle(ctx, heads[0], rerr)
			return p, true, err
		}
		if errors.Is(err, errBatchEmpty) || errors.Is(err, errBatchChanged) {
			return false, false, nil
		}
		// A statement failed: run these messages one at a time, so that
		// the one at fault is charged alone (R-J1).
		e.singleUntil = msgs[len(msgs)-1].h.MsgID
		e.log.Warn("batch rolled back; its messages run one at a time", "first_msg_id", msgs[0].h.MsgID,
			"last_msg_id", e.singleUntil, "messages", len(msgs), "err", err)
		return true, true, nil
	}
	e.marked = next
	e.batched += len(done)
	// The batch finished a run of open messages from the head.
	e.floor.raise(done[len(done)-1].h.MsgID+1, e.floorGen)
	per := time.Since(start).Seconds() / float64(len(done))
	for i, m := range msgs {
		if i < len(done) {
			e.metrics.duration.Record(ctx, per)
			e.reportFinished(m)
			m.x.end(nil)
			continue
		}
		m.x.end(errBatchEmpty) // not reached: runs again as the next head
	}
	return true, true, nil
}

// prepareBatch decodes and classifies the batch's messages (step 1): the
// run of heads that can be decided together, each with its terminal
// outcome when one is decided before any write.
func (e *Engine) prepareBatch(ctx context.Context, heads []*head) []*batchMsg {
	now := e.clock.Now()
	var out []*batchMsg
	for i, h := range heads {
		if i > 0 && (h.State != StatePending || h.ExecutingBy != nil || h.Attempts >= e.opt.MaxAttempts || e.headExpired(h, now)) {
			break
		}
		// A retry runs alone, so that a crash during its next attempt is
		// its own and counted (crashedRun).
		if i == 0 && ((h.ExecutingBy != nil && *h.ExecutingBy != e.instance) || h.Attempts > 0) {
			break
		}
		ectx, x := e.startExecution(ctx, h)
		m := &batchMsg{h: h, ctx: ectx, x: x}
		if !e.prepareOne(m) {
			x.end(errBatchEmpty)
			break
		}
		out = append(out, m)
	}
	return out
}

// prepareOne decodes and classifies one message; false means it cannot
// be part of a batch (its decoding needs a retry, or decide does not
// handle it).
func (e *Engine) prepareOne(m *batchMsg) bool {
	r := e.read(m.ctx, m.h)
	if r.retry != nil {
		return false
	}
	m.msg, m.meta, m.cls = r.msg, r.meta, r.cls
	if r.state != "" {
		m.state, m.class, m.reason, m.parked = r.state, r.class, r.reason, r.parked
		if r.parked {
			m.reason = parkedReason(r.class, r.reason)
		}
		return true
	}
	return decide.Handles(m.msg, m.cls)
}

// markBatch marks the batch on its first message (step 2): executing_by
// names this instance, executing_through the batch's last message, and the
// head gets its processing start — one row version for the whole batch,
// in a transaction that is not synchronously committed (see markHead for
// why that suffices). The other messages are not written before they run:
// a crash is recognised as a batch's by the range on its head (crashedRun).
func (e *Engine) markBatch(ctx context.Context, msgs []*batchMsg) error {
	first, last := msgs[0].h.MsgID, msgs[len(msgs)-1].h.MsgID
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit TO off`); err != nil {
			return fmt.Errorf("relaxing marker commit: %w", err)
		}
		var marked bool
		err := tx.QueryRow(ctx, `
			WITH m AS (
				UPDATE proc_state SET executing_by = CASE WHEN msg_id = $1 THEN $2 END,
					executing_through = CASE WHEN msg_id = $1 THEN $5::bigint END,
					processing_started_at = CASE WHEN msg_id = $1 THEN COALESCE(processing_started_at, $3) ELSE processing_started_at END
				WHERE msg_id = ANY (ARRAY[$1::bigint, $4::bigint]) AND (msg_id <> $1 OR state IN ('PENDING', 'FAILED'))
				RETURNING executing_by)
			SELECT EXISTS (SELECT 1 FROM m WHERE executing_by IS NOT NULL)`,
			first, e.instance, e.clock.Now(), e.marked, last).Scan(&marked)
		if err != nil {
			return fmt.Errorf("marking batch executing: %w", err)
		}
		if !marked {
			return errBatchChanged
		}
		return nil
	})
	if err == nil {
		e.marked = 0
	}
	return err
}

// unmarkBatch withdraws the batch's markers after a batch cut short by
// stopping (see unmark).
func (e *Engine) unmarkBatch(ctx context.Context, msgs []*batchMsg) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := e.exec(uctx, `UPDATE proc_state SET executing_by = NULL, executing_through = NULL WHERE msg_id = $1 AND executing_by = $2`,
		msgs[0].h.MsgID, e.instance); err != nil {
		e.log.Warn("withdrawing batch execution markers on stop; the next start re-runs them one at a time", "err", err)
	}
}

// restoreMarks withdraws the marker of a batch that did not commit and
// the processing start that marking gave its head.
func (e *Engine) restoreMarks(ctx context.Context, msgs []*batchMsg) error {
	h := msgs[0].h
	_, err := e.exec(ctx, `UPDATE proc_state SET executing_by = NULL, executing_through = NULL,
			processing_started_at = CASE WHEN $2 THEN NULL ELSE processing_started_at END
		WHERE msg_id = $1 AND executing_by = $3 AND state IN ('PENDING', 'FAILED')`,
		h.MsgID, h.ProcessingStartedAt == nil, e.instance)
	if err != nil {
		return fmt.Errorf("withdrawing batch marker: %w", err)
	}
	return nil
}

func batchIDs(msgs []*batchMsg) []int64 {
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.h.MsgID
	}
	return ids
}

// writeBatch is steps 3 and 4 in one fenced transaction. It returns the
// messages it finished (a prefix of msgs) and the next head it marked.
func (e *Engine) writeBatch(ctx context.Context, msgs []*batchMsg) (done []*batchMsg, next int64, err error) {
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		done = nil
		ov, holders, err := e.loadBatch(ctx, tx, msgs)
		if err != nil {
			return err
		}
		var binds []batchBind
		var outbox []decide.OutboxRow
		bound := map[string]int64{}
		for _, m := range msgs {
			mark := ov.Mark()
			if m.state == "" {
				stop, err := e.decideOne(m, ov, mark, holders, bound, &binds)
				if err != nil {
					return err
				}
				if stop {
					ov.Rollback(mark)
					break
				}
			}
			if m.now.IsZero() {
				m.now = e.clock.Now()
			}
			outbox = append(outbox, ov.OutboxSince(mark)...)
			if m.state != StateApplied {
				outbox = append(outbox, decide.OutboxRow{Target: TargetMailbox, Pkey: fmt.Sprint(m.h.MsgID), MsgID: m.h.MsgID, At: m.now})
			}
			done = append(done, m)
		}
		if len(done) == 0 {
			return errBatchEmpty
		}
		n, err := e.flushBatch(ctx, tx, ov, binds, outbox, done)
		next = n
		return err
	})
	return done, next, err
}

// batchBind is an identity binding of the batch (R-B4).
type batchBind struct {
	id  int64
	key string
}

// loadBatch locks the batch's messages and loads, in one round trip, the
// identity holders of their keys and the flights they name with their
// code-share children.
func (e *Engine) loadBatch(ctx context.Context, tx pgx.Tx, msgs []*batchMsg) (*apply.Overlay, map[string]int64, error) {
	ids := batchIDs(msgs)
	var keys []string
	var flids []int64
	for _, m := range msgs {
		if m.state == "" {
			keys = append(keys, m.cls.IdentityKey)
			flids = append(flids, decide.FLIDs(m.msg)...)
		}
	}
	slices.Sort(flids)
	flids = slices.Compact(flids)
	b := &pgx.Batch{}
	b.Queue(`SELECT count(*) FROM (SELECT msg_id FROM proc_state WHERE msg_id = ANY($1) AND state IN ('PENDING', 'FAILED') FOR NO KEY UPDATE) l`, ids)
	b.Queue(`SELECT identity_key, msg_id FROM proc_state WHERE identity_key = ANY($1)`, keys)
	apply.QueueLoad(b, flids)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	var locked int
	if err := br.QueryRow().Scan(&locked); err != nil {
		return nil, nil, fmt.Errorf("locking batch messages: %w", err)
	}
	if locked != len(ids) {
		return nil, nil, errBatchChanged
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("loading identity holders: %w", err)
	}
	holders := map[string]int64{}
	for rows.Next() {
		var k string
		var id int64
		if err := rows.Scan(&k, &id); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("loading identity holders: %w", err)
		}
		holders[k] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("loading identity holders: %w", err)
	}
	ov := apply.NewOverlay(tx)
	if err := ov.Load(br, flids); err != nil {
		return nil, nil, fmt.Errorf("loading batch flights: %w", err)
	}
	return ov, holders, br.Close()
}

// decideOne binds m's identity and runs its handler against the overlay.
// stop means the batch ends before m (a retryable failure: it runs alone
// next); an error means the transaction is unusable.
func (e *Engine) decideOne(m *batchMsg, ov *apply.Overlay, mark apply.Mark, holders map[string]int64, bound map[string]int64, binds *[]batchBind) (stop bool, err error) {
	id, key := m.h.MsgID, m.cls.IdentityKey
	m.now = e.clock.Now()
	if other, ok := bound[key]; ok {
		m.state, m.reason = StateSkipped, fmt.Sprintf("duplicate-of:%d", other)
		return false, nil
	}
	if other, ok := holders[key]; ok && other != id {
		m.state, m.reason = StateSkipped, fmt.Sprintf("duplicate-of:%d", other)
		return false, nil
	}
	src := Source{MsgID: id, Type: m.msg.Meta.TYPE, Subtype: m.msg.Meta.STYP, Sender: m.msg.Meta.SNDR, Seqn: m.msg.Meta.SEQN}
	ctx := m.ctx
	w := &decide.Writer{View: ov, Sink: ov, MsgID: id, Src: src, Now: m.now, Zone: e.zone(),
		OnFlight: func(flid int64) { noteFlight(ctx, flid) }}
	var out decide.Outcome
	herr := e.guard(ctx, id, "handling", func() (err error) {
		out, err = decide.Decide(ctx, w, m.msg, m.cls, e.opday)
		return err
	})
	var rej *flight.RejectError
	var skip *decide.Skip
	var unsup *decide.Unsupported
	var oerr *apply.ReadError
	switch {
	case errors.As(herr, &oerr):
		return false, oerr.Err
	case herr == nil:
		if w.Projections() > 0 {
			m.state = StateApplied
		} else {
			m.state = StateSucceeded
		}
		m.reason = out.Note
	case errors.As(herr, &rej):
		ov.Rollback(mark)
		m.state, m.class, m.reason = StateDead, ClassProtocol, rej.Reason
	case errors.As(herr, &skip):
		ov.Rollback(mark)
		m.state, m.reason = StateSkipped, skip.Reason
	case errors.As(herr, &unsup):
		ov.Rollback(mark)
		m.state, m.class, m.reason, m.parked = StateDead, ClassUnsupported, parkedReason(ClassUnsupported, unsup.Reason), true
	default:
		// A retryable failure, a panic, or an error of the handler: the
		// message runs alone next and gets its outcome there.
		return true, nil
	}
	if herr != nil {
		// DEAD or SKIPPED: nothing applied, so no identity reserved (R-K3).
		return false, nil
	}
	// Bound outside the handler's savepoint, as the one message path does.
	bound[key] = id
	*binds = append(*binds, batchBind{id: id, key: key})
	return false, nil
}

// flushBatch writes the batch's decisions (step 4) and hands the marker
// to the next head.
func (e *Engine) flushBatch(ctx context.Context, tx pgx.Tx, ov *apply.Overlay, binds []batchBind, outbox []decide.OutboxRow,
	done []*batchMsg) (int64, error) {
	b := &pgx.Batch{}
	// Identity bindings are written with the states below: one row version
	// per message.
	identity := make(map[int64]string, len(binds))
	for _, x := range binds {
		identity[x.id] = x.key
	}
	keyOf := func(id int64) *string {
		if k, ok := identity[id]; ok {
			return &k
		}
		return nil
	}
	// The decision's writes (package apply), then the states of the
	// messages (the FIFO head's).
	writes := ov.Queue(b, outbox)
	var term, applied []*batchMsg
	for _, m := range done {
		if m.state == StateApplied {
			applied = append(applied, m)
		} else {
			term = append(term, m)
		}
	}
	if len(term) > 0 {
		n := len(term)
		ids, states, classes, reasons, ats := make([]int64, n), make([]string, n), make([]*string, n), make([]string, n), make([]time.Time, n)
		sndr, typ, styp, seqn, dttm, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
		for i, m := range term {
			ids[i], states[i], reasons[i], ats[i], keys[i] = m.h.MsgID, m.state, clip.Text(m.reason), m.now, keyOf(m.h.MsgID)
			if m.class != "" {
				c := m.class
				classes[i] = &c
			}
			if m.meta != nil {
				sndr[i], typ[i], styp[i], seqn[i], dttm[i] = m.meta.SNDR, m.meta.TYPE, m.meta.STYP, m.meta.SEQN, m.meta.DTTM
			}
		}
		b.Queue(`
			WITH u AS (
				UPDATE proc_state p SET state=v.state, error_class=v.cls, reason=v.reason, finished_at=v.at, updated_at=v.at,
					next_attempt_at=NULL, executing_by=NULL, executing_through=NULL,
					processing_started_at=COALESCE(p.processing_started_at, v.at),
					identity_key=CASE WHEN v.state IN ('DEAD', 'SKIPPED') THEN NULL ELSE COALESCE(v.ik, p.identity_key) END,
					sndr=COALESCE(NULLIF(v.sndr, ''), p.sndr), msg_type=COALESCE(NULLIF(v.typ, ''), p.msg_type),
					msg_styp=COALESCE(NULLIF(v.styp, ''), p.msg_styp), seqn=COALESCE(NULLIF(v.seqn, ''), p.seqn),
					dttm=COALESCE(NULLIF(v.dttm, ''), p.dttm)
				FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
					AS v(id, state, cls, reason, at, sndr, typ, styp, seqn, dttm, ik)
				WHERE p.msg_id = v.id AND p.state IN ('PENDING', 'FAILED', 'APPLIED')
				RETURNING p.msg_id)
			SELECT count(*) FROM u`, ids, states, classes, reasons, ats, sndr, typ, styp, seqn, dttm, keys)
	}
	if len(applied) > 0 {
		n := len(applied)
		ids, notes, ats := make([]int64, n), make([]string, n), make([]time.Time, n)
		sndr, typ, styp, seqn, dttm, keys := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
		for i, m := range applied {
			ids[i], notes[i], ats[i], keys[i] = m.h.MsgID, clip.Text(m.reason), m.now, keyOf(m.h.MsgID)
			sndr[i], typ[i], styp[i], seqn[i], dttm[i] = m.meta.SNDR, m.meta.TYPE, m.meta.STYP, m.meta.SEQN, m.meta.DTTM
		}
		// Every message here wrote its pending projections in this
		// transaction, which no ack can have removed yet, so APPLIED needs
		// no second look under the row lock (compare markApplied, R-H4).
		b.Queue(`
			UPDATE proc_state p SET state='APPLIED', error_class=NULL, reason=NULLIF(v.note, ''), applied_at=v.at, updated_at=v.at,
				next_attempt_at=NULL, executing_by=NULL, executing_through=NULL,
				processing_started_at=COALESCE(p.processing_started_at, v.at), identity_key=COALESCE(v.ik, p.identity_key),
				sndr=v.sndr, msg_type=v.typ, msg_styp=v.styp, seqn=v.seqn, dttm=v.dttm
			FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
				AS v(id, note, at, sndr, typ, styp, seqn, dttm, ik)
			WHERE p.msg_id = v.id AND p.state IN ('PENDING', 'FAILED')
			RETURNING p.msg_id, p.registered_at`, ids, notes, ats, sndr, typ, styp, seqn, dttm, keys)
	}
	br := tx.SendBatch(ctx, b)
	registered := map[int64]time.Time{}
	err := func() error {
		defer br.Close()
		for i := 0; i < writes; i++ {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("writing batch decisions: %w", err)
			}
		}
		if len(term) > 0 {
			var c int
			if err := br.QueryRow().Scan(&c); err != nil {
				return fmt.Errorf("writing terminal states: %w", err)
			}
			if c != len(term) {
				return errBatchChanged
			}
		}
		if len(applied) > 0 {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("marking batch applied: %w", err)
			}
			for rows.Next() {
				var id int64
				var at time.Time
				if err := rows.Scan(&id, &at); err != nil {
					rows.Close()
					return fmt.Errorf("marking batch applied: %w", err)
				}
				registered[id] = at
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("marking batch applied: %w", err)
			}
			if len(registered) != len(applied) {
				return errBatchChanged
			}
		}
		return br.Close()
	}()
	if err != nil {
		return 0, err
	}
	for _, m := range applied {
		at := registered[m.h.MsgID]
		m.registered = &at
		runHook(m.ctx, hookApplied, tx, m.h.MsgID)
	}
	next, _, err := e.markNext(ctx, tx, done[len(done)-1].h.MsgID)
	return next, err
}

// reportFinished counts and logs one message the batch finished, as the
// one message path does (finishIn, markApplied, park).
func (e *Engine) reportFinished(m *batchMsg) {
	ctx := m.ctx
	e.metrics.finished.Add(ctx, 1, stateAttr(m.state))
	if m.parked {
		e.metrics.failed.Add(ctx, 1, classAttr(m.class))
	}
	if m.state == StateApplied {
		e.metrics.stage(ctx, StageApplied, m.registered, m.now)
		e.log.InfoContext(ctx, "message applied", append([]any{"msg_id", m.h.MsgID, "type", m.meta.TYPE, "styp", m.meta.STYP, "batch", true}, flightAttrs(ctx)...)...)
		return
	}
	if m.state == StateDead {
		e.reportDead(ctx, m.h.MsgID, m.class, m.reason, append([]any{"batch", true}, flightAttrs(ctx)...)...)
		return
	}
	e.log.InfoContext(ctx, "message finished", append([]any{"msg_id", m.h.MsgID, "state", m.state, "class", m.class,
		"reason", clip.Text(m.reason), "batch", true}, flightAttrs(ctx)...)...)
}
