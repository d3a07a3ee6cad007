package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/apply"
	"msgexchange/services/processor/internal/decide"
)

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

func batchIDs(msgs []*batchMsg) []int64 {
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.h.MsgID
	}
	return ids
}
