package relay

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/lifecycle"
	"msgexchange/services/internal/procstate"
)

// Marker outcomes (R-D4), recorded in outbox.outcome.
const (
	OutcomeWritten       = "written"
	OutcomeAlreadyMarked = "already-marked"
	OutcomeRowMissing    = "row-missing"
	OutcomeGaveUp        = "gave-up"
	// OutcomeOverdue: the marker kept failing until R
	// (pipeline.overdue-backfill) after its message finished; automatic
	// retries stopped at once, before backfill-max-attempts (INV-7, CLM-4).
	OutcomeOverdue = "overdue"
	// OutcomeShadowed: shadow mode settled the intent without writing the
	// marker (R-L6); the backfill is finished with this outcome so nothing
	// waits for a write that shadow mode never makes.
	OutcomeShadowed = "shadowed"
	// OutcomeRowReplaced: the mailbox row under the message's ID is not
	// the row the message was read from — its CMINMSGS_DATE_RECEIVED
	// differs from the one registered — so the ID was handed out again
	// (a failover of the mailbox's database to a replica that lacked the
	// row, a restore, an AUTO_INCREMENT reset). The marker would tell the
	// mailbox that a message nobody processed was; it is never written,
	// and the intent is abandoned like a missing row's.
	OutcomeRowReplaced = "row-replaced"
)

// BackfillAbandoned is proc_state.backfill_outcome of a backfill finished
// without a marker because the mailbox row was missing; a marker recorded
// as written or already-marked stores that outcome.
const BackfillAbandoned = "abandoned"

func (r *Relay) mailboxService() *lifecycle.Service {
	return lifecycle.NewService("dispatcher-mailbox", nil, func(ctx context.Context) error {
		return r.loop(ctx, TargetMailbox, r.DrainMailbox)
	}, nil)
}

// mailboxFreshQuery reads the fresh lane's intents above the floor in ID
// order; mailboxRetryQuery the retry lane's due intents in due-time order.
const (
	mailboxFreshQuery = `
SELECT id, msg_id, attempts, created_at, next_attempt_at, next_attempt_at <= $1, ` + intentReceivedAt + ` FROM outbox
WHERE target='mailbox' AND state='PENDING' AND NOT retry AND id > $2
ORDER BY id LIMIT $3`
	mailboxRetryQuery = `
SELECT id, msg_id, attempts, created_at, next_attempt_at, true, ` + intentReceivedAt + ` FROM outbox
WHERE target='mailbox' AND state='PENDING' AND retry AND next_attempt_at <= $1
ORDER BY next_attempt_at, id LIMIT $2`
)

// intentReceivedAt reads, with each intent, the mailbox receive time its
// message was registered with (proc_state.received_at, by primary key):
// the marker is written only onto the row that time identifies
// (OutcomeRowReplaced). NULL — the row had none, or the record is gone —
// identifies nothing, and the ID alone is trusted, as before.
const intentReceivedAt = `(SELECT p.received_at FROM proc_state p WHERE p.msg_id = outbox.msg_id)`

// intent is one pending marker intent.
type intent struct {
	id, msgID int64
	attempts  int
	created   time.Time
	due       time.Time
	isDue     bool
	fresh     bool
	// received is the CMINMSGS_DATE_RECEIVED the message was read with,
	// nil when unknown.
	received *time.Time
}

// readIntents reads up to a batch of each lane's intents and returns the
// due ones in due-time order (rows in backoff rotate behind fresh ones,
// R-D4 fairness) and the floor the fresh lane reaches once they are
// settled.
func (r *Relay) readIntents(ctx context.Context, now time.Time, floor int64) ([]intent, int64, bool, error) {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The lanes' reads and the term's check go in one round trip (R-M2):
	// the markers of what is read are written only under a current term
	// (R-H6).
	scan := func(fresh bool, out *[]intent) func(pgx.Rows) error {
		return func(rows pgx.Rows) (err error) {
			*out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (intent, error) {
				i := intent{fresh: fresh}
				return i, row.Scan(&i.id, &i.msgID, &i.attempts, &i.created, &i.due, &i.isDue, &i.received)
			})
			return err
		}
	}
	var fresh, retry []intent
	b := &pgx.Batch{}
	b.Queue(mailboxFreshQuery, now, floor, r.opt.Batch).Query(scan(true, &fresh))
	b.Queue(mailboxRetryQuery, now, r.opt.Batch).Query(scan(false, &retry))
	if err := r.db(TargetMailbox).ReadChecked(qctx, r.reads, b); err != nil {
		return nil, 0, false, fmt.Errorf("reading marker intents: %w", err)
	}
	more := len(fresh) == r.opt.Batch || len(retry) == r.opt.Batch
	to := floor
	var batch []intent
	for _, i := range fresh {
		if !i.isDue {
			break // the floor stops below the first intent not due yet
		}
		to = i.id
		batch = append(batch, i)
	}
	batch = append(batch, retry...)
	slices.SortFunc(batch, func(a, b intent) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	return batch, to, more, nil
}

// DrainMailbox writes one batch of processed markers: one locking read and
// one UPDATE in MySQL for the whole batch, then one fenced statement in
// PostgreSQL that records every outcome. Rows are taken in due-time order,
// so rows in backoff rotate behind fresh ones (fairness).
func (r *Relay) DrainMailbox(ctx context.Context) (bool, error) {
	now := r.opt.Clock.Now()
	floor, token := r.floors.start(TargetMailbox)
	batch, to, more, err := r.readIntents(ctx, now, floor)
	if err != nil {
		return false, err
	}
	if len(batch) == 0 {
		return false, nil
	}
	// The term was proved current with the reads (readIntents); the
	// markers' outcomes are recorded in one fenced statement, whose refusal
	// ends the term (R-H6).
	rows := make([]markRow, len(batch))
	for i, it := range batch {
		rows[i] = it.markRow()
	}
	// Shadow mode settles every intent without a MySQL statement (R-L6).
	var outcomes map[int64]string
	var batchErr error
	if r.opt.Shadow {
		outcomes = shadowOutcomes(rows)
	} else {
		outcomes, batchErr = r.markBatch(ctx, rows)
	}
	if batchErr != nil && ctx.Err() != nil {
		return false, nil
	}
	// A batch that fails because the mailbox is unreachable, or refuses
	// the account or misses its table, fails as a whole: every intent waits
	// the target's outage schedule, uncounted, and nothing is tried row by
	// row against a server that is away or refuses every row alike (R-L2,
	// R-L8). Any other failed batch is marked again row by row, so that a
	// row the mailbox keeps refusing fails alone and never holds the others
	// back (R-D4 fair rotation); each row then has its own outcome or error.
	var rowErr map[int64]error
	switch {
	case batchErr != nil && classifyMySQL(batchErr).waits():
		rowErr = map[int64]error{}
		for _, it := range batch {
			rowErr[it.msgID] = batchErr
		}
	case batchErr != nil:
		rowErr = map[int64]error{}
		outcomes = map[int64]string{}
		for _, it := range batch {
			outcome, err := r.mark(ctx, it.markRow())
			if err != nil {
				if ctx.Err() != nil {
					return false, nil
				}
				rowErr[it.msgID] = err
				continue
			}
			outcomes[it.msgID] = outcome
		}
	}
	done := r.opt.Clock.Now()
	settled := make([]mailboxSettlement, 0, len(batch))
	var marked []time.Time
	var shadowedN int64
	var markErr error
	answered := 0
	wait := time.Duration(0)
	for _, it := range batch {
		if err := rowErr[it.msgID]; err != nil {
			markErr = err
			c := classifyMySQL(err)
			if c.waits() && wait == 0 {
				wait = r.transientWait(TargetMailbox, r.outages.fail(TargetMailbox))
			}
			settled = append(settled, r.mailboxFailure(ctx, it.id, it.msgID, it.attempts+1, it.created, c, err, done, wait))
			continue
		}
		outcome := outcomes[it.msgID]
		answered++ // the mailbox answered for the intent (or shadow mode settled it)
		r.markers.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
		if why, ok := abandonedBecause[outcome]; ok {
			// Never treated as marked: abandoned and listed for the
			// operators. A replaced row's message is registered as a
			// reused ID (R-L5).
			r.log.Error(why, "msg_id", it.msgID,
				"registered_received_at", it.received, "alert", "backfill-abandoned")
			settled = append(settled, mailboxSettlement{id: it.id, state: "ABANDONED", outcome: outcome, sentAt: &done})
			continue
		}
		settled = append(settled, mailboxSettlement{id: it.id, state: "SENT", outcome: outcome, sentAt: &done})
		if outcome == OutcomeShadowed {
			shadowedN++
			continue
		}
		marked = append(marked, it.created)
	}
	r.shadowed.Add(ctx, shadowedN, targetAttr(TargetMailbox))
	if wait == 0 {
		r.outages.ok(TargetMailbox)
	}
	if err := r.settleMailbox(ctx, settled); err != nil {
		return false, err
	}
	if answered > 0 {
		r.delivered(TargetMailbox)
	}
	r.floors.advance(TargetMailbox, token, to)
	r.sent.Add(ctx, int64(len(marked)), targetAttr(TargetMailbox))
	for _, c := range marked {
		r.stage(ctx, StageMarked, TargetMailbox, c, done)
	}
	if markErr != nil {
		return false, fmt.Errorf("writing markers: %w", markErr)
	}
	return more, nil
}

// abandonedBecause are the marker outcomes that abandon the intent at
// once, with what the log says of each.
var abandonedBecause = map[string]string{
	OutcomeRowMissing:  "mailbox row missing; backfill abandoned",
	OutcomeRowReplaced: "mailbox row under the message's ID was received at another time: the ID was handed out again; marker not written, backfill abandoned",
}

// markRow is one row a marker is asked for: the message's ID and the
// receive time it was registered with (nil: unknown).
type markRow struct {
	id       int64
	received *time.Time
}

// markRow is the row the intent's marker is asked for.
func (i intent) markRow() markRow { return markRow{id: i.msgID, received: i.received} }

// markBatch writes the processed marker onto every unmarked row of rows
// and returns each ID's outcome: written, already-marked, row-missing or
// row-replaced. It never overwrites a marker (INV-7), and never writes one
// onto a row whose CMINMSGS_DATE_RECEIVED is not the one its message was
// registered with (sameReceipt). One MySQL transaction: a locking read of
// the rows tells the outcomes apart, and one UPDATE marks the unmarked
// ones, which the lock keeps unmarked and unchanged until it commits, so
// the outcome of every row is exact.
func (r *Relay) markBatch(ctx context.Context, rows []markRow) (map[int64]string, error) {
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	want := make(map[int64]*time.Time, len(rows))
	for _, m := range rows {
		want[m.id] = m.received
	}
	uniq := slices.Sorted(maps.Keys(want))
	in := strings.Repeat(",?", len(uniq))[1:]
	args := make([]any, len(uniq))
	for i, id := range uniq {
		args[i] = id
	}
	tx, err := r.opt.Mailbox.BeginTx(mctx, nil)
	if err != nil {
		return nil, fmt.Errorf("writing markers: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	found, err := tx.QueryContext(mctx, `SELECT CMINMSGS_ID, CMINMSGS_DATE_PROCESSED, CMINMSGS_DATE_RECEIVED FROM CMINMSGS WHERE CMINMSGS_ID IN (`+in+`) FOR UPDATE`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading markers: %w", err)
	}
	out := make(map[int64]string, len(uniq))
	var unmarked []int64
	for found.Next() {
		var id int64
		var processed, received sql.NullTime
		if err := found.Scan(&id, &processed, &received); err != nil {
			_ = found.Close()
			return nil, fmt.Errorf("reading markers: %w", err)
		}
		switch {
		case !sameReceipt(want[id], received):
			out[id] = OutcomeRowReplaced
		case processed.Valid:
			out[id] = OutcomeAlreadyMarked
		default:
			out[id] = OutcomeWritten
			unmarked = append(unmarked, id)
		}
	}
	if err := found.Err(); err != nil {
		return nil, fmt.Errorf("reading markers: %w", err)
	}
	_ = found.Close()
	for _, id := range uniq {
		if _, ok := out[id]; !ok {
			out[id] = OutcomeRowMissing
		}
	}
	if len(unmarked) > 0 {
		if err := writeMarkers(mctx, tx, unmarked, r.opt.Clock.Now(), r.opt.ProcessedValue); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("committing markers: %w", err)
	}
	return out, nil
}

// sameReceipt reports whether a mailbox row received at got is the row a
// message registered with receive time want was read from. The mailbox
// promises never to hand an ID out twice (C-3), but a failover of its
// database to a replica that lacked the newest rows hands their IDs out
// again with AUTO_INCREMENT: a marker by ID alone would then mark another
// message, one that ran nowhere, as processed. The receive time tells the
// two apart: the new row was inserted after the failover, the lost one
// before it, seconds at least apart. Both are compared as the mailbox's
// wall clock in the zone the connection reads DATETIMEs in (the zone
// ingest read want in), to the second: the column is a DATETIME (seconds,
// the mailbox's schema), and ingest registers the time to the second (its
// msgx-received-at header, RFC 3339) whatever fraction a column might
// keep. An unknown want trusts the ID alone; a row without a receive
// time, where one was registered, is another row.
func sameReceipt(want *time.Time, got sql.NullTime) bool {
	if want == nil {
		return true
	}
	if !got.Valid {
		return false
	}
	const wall = "2006-01-02 15:04:05"
	return want.In(got.Time.Location()).Format(wall) == got.Time.Format(wall)
}

// shadowOutcomes is markBatch in shadow mode (R-L6): every intent is
// settled as shadowed and no marker is written, so intents never pile up
// waiting for a write that shadow mode never makes; the backfill finishes
// with outcome shadowed and the record is cleaned up at its retention.
func shadowOutcomes(rows []markRow) map[int64]string {
	out := make(map[int64]string, len(rows))
	for _, m := range rows {
		out[m.id] = OutcomeShadowed
	}
	return out
}

// mark writes the processed marker of one message (markBatch of one).
func (r *Relay) mark(ctx context.Context, m markRow) (string, error) {
	out, err := r.markBatch(ctx, []markRow{m})
	if err != nil {
		return "", err
	}
	return out[m.id], nil
}

// mailboxSettlement is what one marker attempt did to one intent.
type mailboxSettlement struct {
	id        int64
	uncounted bool   // a transient failure: the intent's attempts stay (R-L2)
	state     string // SENT, ABANDONED, PENDING (backoff) or DEAD
	outcome   string // empty: unchanged
	lastError *string
	next      *time.Time
	sentAt    *time.Time
}

// mailboxSettleQuery records a batch of marker attempts in one statement:
// each intent's state, outcome, one more attempt (none for a transient
// failure, R-L2) and, for a failure, its
// error and next attempt (which moves it to the retry lane); the backfill
// of every message marked or abandoned is finished in the same statement
// (backfilled_at, backfill_outcome), so the unmarked backlog stops counting
// it (R-D4).
var mailboxSettleQuery = `
WITH v AS (
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $8::int[])
		AS v(id, state, outcome, last_error, next, sent_at, add)),
o AS (
	UPDATE outbox o SET
		state = v.state,
		outcome = COALESCE(NULLIF(v.outcome, ''), o.outcome),
		attempts = o.attempts + v.add,
		last_error = COALESCE(v.last_error, o.last_error),
		next_attempt_at = COALESCE(v.next, o.next_attempt_at),
		sent_at = COALESCE(v.sent_at, o.sent_at),
		retry = o.retry OR v.state <> 'SENT'
	FROM v WHERE o.id = v.id AND o.state = 'PENDING'
	RETURNING o.msg_id, o.state, o.outcome, o.sent_at)
` + procstate.RecordBackfill("o", 7)

// settleMailbox records settled in one fenced statement.
func (r *Relay) settleMailbox(ctx context.Context, settled []mailboxSettlement) error {
	if len(settled) == 0 {
		return nil
	}
	ids := make([]int64, len(settled))
	states := make([]string, len(settled))
	outcomes := make([]string, len(settled))
	errs := make([]*string, len(settled))
	next := make([]*time.Time, len(settled))
	sent := make([]*time.Time, len(settled))
	add := make([]int32, len(settled))
	for i, s := range settled {
		ids[i], states[i], outcomes[i], errs[i], next[i], sent[i] = s.id, s.state, s.outcome, s.lastError, s.next, s.sentAt
		if !s.uncounted {
			add[i] = 1
		}
	}
	if _, err := r.db(TargetMailbox).Exec(ctx, mailboxSettleQuery, ids, states, outcomes, errs, next, sent, BackfillAbandoned, add); err != nil {
		return fmt.Errorf("recording markers: %w", err)
	}
	return nil
}

// markAbandoned ends the intent of a mailbox row that does not exist. The
// backfill is finished (backfilled_at set, outcome "abandoned") in the same
// statement, so the unmarked backlog stops counting a message that can never
// be marked; the ABANDONED row stays listed and counted for the operators
// until they acknowledge it (R-D4).
func (r *Relay) markAbandoned(ctx context.Context, id int64, now time.Time) error {
	if err := r.settleMailbox(ctx, []mailboxSettlement{{id: id, state: "ABANDONED", outcome: OutcomeRowMissing, sentAt: &now}}); err != nil {
		return fmt.Errorf("recording abandoned backfill: %w", err)
	}
	return nil
}

func (r *Relay) markSent(ctx context.Context, id, msgID int64, outcome string, now time.Time) error {
	if err := r.settleMailbox(ctx, []mailboxSettlement{{id: id, state: "SENT", outcome: outcome, sentAt: &now}}); err != nil {
		return fmt.Errorf("recording marker of %s: %w", strconv.FormatInt(msgID, 10), err)
	}
	r.sent.Add(ctx, 1, targetAttr(TargetMailbox))
	return nil
}

// markFailed records one failed marker (mailboxFailure).
func (r *Relay) markFailed(ctx context.Context, id, msgID int64, attempts int, created time.Time, cause error, now time.Time) error {
	c := classifyMySQL(cause)
	var wait time.Duration
	if c.waits() {
		wait = r.transientWait(TargetMailbox, r.outages.fail(TargetMailbox))
	}
	return r.settleMailbox(ctx, []mailboxSettlement{r.mailboxFailure(ctx, id, msgID, attempts, created, c, cause, now, wait)})
}

// mailboxFailure settles a failed marker of class c (R-L2). A marker that
// fails more than R (OverdueBackfill) after its message finished stops
// automatic retries at once, whatever the cause (INV-7, CLM-4). Before
// that, a transient failure (the mailbox unreachable) or a stalled one
// (the mailbox refusing the account or missing its table, which the loop
// reports as its stall, R-L8) waits wait — the target's outage schedule,
// at most backfill-outage-retry-max — without counting, so neither an
// outage nor a revoked grant shorter than R ever gives a marker up; a
// refused one backs off 30 s doubling to 15 min and stops automatic
// retries with an alert at backfill-max-attempts. The age is
// measured from created, the intent's creation by the processor with the
// terminal state: our own clock, never the mailbox's
// CMINMSGS_DATE_RECEIVED, which may be NULL or skewed (INV-7).
func (r *Relay) mailboxFailure(ctx context.Context, id, msgID int64, attempts int, created time.Time, c class, cause error, now time.Time, wait time.Duration) mailboxSettlement {
	r.failed.Add(ctx, 1, classAttrs(TargetMailbox, c))
	msg := cause.Error()
	if r.opt.OverdueBackfill > 0 && now.Sub(created) >= r.opt.OverdueBackfill {
		r.log.Error("backfill overdue; automatic retries stopped, operator action needed", "msg_id", msgID, "attempts", attempts,
			"finished_at", created, "overdue_after", r.opt.OverdueBackfill, "err", cause, "alert", "backfill-overdue")
		r.markers.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", OutcomeOverdue)))
		return mailboxSettlement{id: id, state: "DEAD", outcome: OutcomeOverdue, lastError: &msg}
	}
	if c.waits() {
		next := now.Add(wait)
		return mailboxSettlement{id: id, state: "PENDING", lastError: &msg, next: &next, uncounted: true}
	}
	if attempts >= r.opt.BackfillMaxAttempts {
		r.log.Error("backfill gave up; operator action needed", "msg_id", msgID, "attempts", attempts, "err", cause, "alert", "backfill-gave-up")
		r.markers.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", OutcomeGaveUp)))
		return mailboxSettlement{id: id, state: "DEAD", outcome: OutcomeGaveUp, lastError: &msg}
	}
	next := now.Add(r.delay(attempts, r.opt.BackfillBackoffMin, r.opt.BackfillBackoffMax))
	r.log.Warn("writing marker failed; will retry", "msg_id", msgID, "attempt", attempts, "next_attempt_at", next, "err", cause)
	return mailboxSettlement{id: id, state: "PENDING", lastError: &msg, next: &next}
}
