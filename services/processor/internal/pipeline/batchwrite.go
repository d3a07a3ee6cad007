package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"msgexchange/libs/clip"
	"msgexchange/libs/lease"
	"msgexchange/services/internal/procstate"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/apply"
	"msgexchange/services/processor/internal/decide"
)

// writeBatch is steps 3 and 4 in one fenced transaction. It returns the
// messages it finished (a prefix of msgs) and the next head it marked; when
// the first message's handler failed, nothing is written (errBatchEmpty)
// and stop is its failure.
func (e *Engine) writeBatch(ctx context.Context, msgs []*batchMsg) (done []*batchMsg, next int64, stop, err error) {
	registered := map[int64]time.Time{}
	prefetched := func() *headsRead { return nil }
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		done, stop, next = nil, nil, 0
		clear(registered)
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
				failed, err := e.decideOne(m, ov, mark, holders, bound, &binds)
				if err != nil {
					return err
				}
				if failed != nil {
					ov.Rollback(mark)
					if len(done) == 0 {
						stop = failed
					}
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
		if err := e.flushBatch(ctx, tx, ov, binds, outbox, done, &next, registered); err != nil {
			return err
		}
		prefetched = e.prefetchHeads(tx, done[len(done)-1].h.MsgID)
		return nil
	})
	if procstate.Checked(err) {
		// A message of the batch was not open any more: nothing committed.
		err = fmt.Errorf("%w: %w", errBatchChanged, err)
	}
	if err != nil {
		return done, 0, stop, err
	}
	// The writes' results arrive with the commit, and the next step's
	// heads after it.
	e.prefetched = prefetched()
	for _, m := range done {
		if m.state == StateApplied {
			at := registered[m.h.MsgID]
			m.registered = &at
		}
	}
	return done, next, stop, nil
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
// failed is the handler's retryable failure (a panic, an INFRA failure or
// an error of the handler): the batch ends before m, which is charged if
// it is the first, or else runs first next. An error means the
// transaction is unusable.
func (e *Engine) decideOne(m *batchMsg, ov *apply.Overlay, mark apply.Mark, holders map[string]int64, bound map[string]int64, binds *[]batchBind) (failed, err error) {
	id, key := m.h.MsgID, m.cls.IdentityKey
	m.now = e.clock.Now()
	if other, ok := bound[key]; ok {
		m.state, m.reason = StateSkipped, fmt.Sprintf("duplicate-of:%d", other)
		return nil, nil
	}
	if other, ok := holders[key]; ok && other != id {
		m.state, m.reason = StateSkipped, fmt.Sprintf("duplicate-of:%d", other)
		return nil, nil
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
	out, herr = decide.Judge(out, herr, w.Projections())
	var oerr *apply.ReadError
	switch {
	case errors.As(herr, &oerr):
		return nil, oerr.Err
	case herr != nil:
		// A panic, or an error of the handler: the batch ends before m.
		return herr, nil
	}
	m.reason = out.Note
	switch out.Kind {
	case decide.Applied:
		m.state = StateApplied
	case decide.Succeeded:
		m.state = StateSucceeded
	case decide.Rejected, decide.Skipped, decide.Parked:
		// Nothing applied, so no identity reserved (R-K3).
		ov.Rollback(mark)
		m.state, m.class = StateSkipped, out.Class
		if out.Kind != decide.Skipped {
			m.state = StateDead
		}
		if out.Kind == decide.Parked {
			m.reason, m.parked = parkedReason(out.Class, out.Note), true
		}
		return nil, nil
	case decide.Retry:
		return &failure{class: out.Class, reason: out.Note}, nil
	default:
		return fmt.Errorf("message %d: outcome %d is not one of a batch", id, out.Kind), nil
	}
	// Bound outside the handler's savepoint, as the one message path does.
	bound[key] = id
	*binds = append(*binds, batchBind{id: id, key: key})
	return nil, nil
}

// flushBatch queues the batch's decisions (step 4) and the hand-over of
// the marker to the next head, to be sent with the transaction's COMMIT;
// once it committed, next is the head it marked and registered holds the
// registration time of every message it APPLIED.
func (e *Engine) flushBatch(ctx context.Context, tx pgx.Tx, ov *apply.Overlay, binds []batchBind, outbox []decide.OutboxRow,
	done []*batchMsg, next *int64, registered map[int64]time.Time) error {
	b := &pgx.Batch{}
	// Identity bindings are written with the states below: one row version
	// per message.
	identity := make(map[int64]string, len(binds))
	for _, x := range binds {
		identity[x.id] = x.key
	}
	// The decision's writes (package apply) but its outbox rows, then the
	// states of the messages with the outbox rows in decision order and
	// the mailbox intents in their places (package procstate).
	ov.Queue(b, nil)
	var term []procstate.Finish
	var applied []procstate.Apply
	for _, m := range done {
		var meta metaCols
		if m.meta != nil {
			meta = *m.meta
		}
		if m.state == StateApplied {
			applied = append(applied, procstate.Apply{MsgID: m.h.MsgID, Note: m.reason, At: m.now, Meta: meta, Identity: identity[m.h.MsgID]})
			continue
		}
		term = append(term, procstate.Finish{MsgID: m.h.MsgID, State: m.state, Class: m.class, Reason: m.reason, At: m.now, Meta: meta,
			Identity: identity[m.h.MsgID]})
	}
	// Every statement checks what the commit depends on (every message of
	// the batch still open: the row locks loadBatch took hold them), so the
	// writes travel with the fence and COMMIT in one round trip (R-M2).
	if len(term) > 0 || len(outbox) > 0 {
		procstate.QueueFinishAll(b, term, outbox)
	}
	if len(applied) > 0 {
		// Every message here wrote its pending projections in this
		// transaction, under the row locks loadBatch took, so no ack can
		// have removed them (compare markApplied, R-H4).
		procstate.QueueApplyAll(b, applied, func(moved []procstate.AppliedAt) {
			for _, a := range moved {
				registered[a.MsgID] = a.Registered
			}
		})
	}
	// The marker goes to the next head in the same round trip (markNext).
	procstate.QueueHandOver(b, e.handOver(done[len(done)-1].h.MsgID), func(n int64, _ bool) error {
		*next = n
		return nil
	})
	if err := lease.SendAtCommit(ctx, tx, b); err != nil {
		return fmt.Errorf("writing batch decisions: %w", err)
	}
	return nil
}

// reportFinished counts and logs one message the batch finished, as the
// own-kind path in execute.go does (finishIn, markApplied, parkIn).
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
