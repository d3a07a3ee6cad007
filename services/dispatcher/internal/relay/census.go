package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgexchange/libs/backoff"
	"msgexchange/libs/clock"
	"msgexchange/libs/lifecycle"
	"msgexchange/libs/mysqlutil"
	"msgexchange/libs/progress"
)

// Census answers the control plane's mailbox census requests (R-L6,
// R-N9): the figures of the shared mailbox the cutover from the
// predecessor asks for, which the control plane cannot read (it has no
// mailbox account) and operators should not have to ask with SQL. It only
// reads the mailbox, with the dispatcher's column grants on CMINMSGS_ID and
// CMINMSGS_DATE_PROCESSED, so every dispatcher instance runs it, without a
// lease and in shadow mode too; a claim by SKIP LOCKED keeps two instances
// from counting the same request.
//
// It is not part of Relay: Relay writes PostgreSQL only through its
// targets' fenced terms, while a census writes only its own request row,
// which no lease guards.
type Census struct {
	opt CensusOptions
	// progress tracks the loop (R-L8): stalled while PostgreSQL refuses
	// the census table or the mailbox refuses the census's reads.
	progress *progress.Tracker
}

// CensusLoop names the census loop in readiness answers and in the loop
// metrics.
const CensusLoop = "dispatcher-census"

// CensusOptions configure a Census.
type CensusOptions struct {
	Logger  *slog.Logger
	Clock   clock.Clock
	Pool    *pgxpool.Pool
	Mailbox *sql.DB
	// Poll is how often PENDING requests are looked for: a census is
	// answered about this long after it was asked. Zero means 1s.
	Poll time.Duration
	// QueryTimeout bounds the census's queries on the mailbox (each a scan
	// of CMINMSGS, cancelled when it runs over); a request taken more
	// than twice this long ago and not finished (its instance died) is
	// taken again. Zero means 30s.
	QueryTimeout time.Duration
	// Rand is the jitter source of the retry after a failed claim; nil is
	// math/rand.
	Rand func() float64
	// StallLimit is how long the loop may stay stalled — refused by
	// PostgreSQL or the mailbox in a way no wait cures — before its
	// service ends, so that the supervisor restarts the process (R-L8);
	// 0 means DefaultStallLimit.
	StallLimit time.Duration
}

// NewCensus returns a Census.
func NewCensus(opt CensusOptions) (*Census, error) {
	if opt.Pool == nil || opt.Mailbox == nil {
		return nil, errors.New("creating mailbox census: Pool and Mailbox are required")
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.QueryTimeout <= 0 {
		opt.QueryTimeout = 30 * time.Second
	}
	if opt.StallLimit <= 0 {
		opt.StallLimit = DefaultStallLimit
	}
	return &Census{opt: opt, progress: progress.New(CensusLoop, opt.Clock)}, nil
}

// Service returns the loop that answers census requests.
func (c *Census) Service() *lifecycle.Service {
	return lifecycle.NewService(CensusLoop, nil, c.run, nil)
}

// Progress is the loop's tracker: the dispatcher is not ready while it is
// stalled (R-L8).
func (c *Census) Progress() *progress.Tracker { return c.progress }

// run answers requests until ctx ends: every PENDING one at once, then one
// look every Poll. A failed claim (PostgreSQL unreachable) is retried on
// libs/backoff's schedule up to 30 s. Each round reports to the loop's
// progress (answered); a loop stalled past the stall limit returns the
// stall, which ends its service and the process (R-L8).
func (c *Census) run(ctx context.Context) error {
	retry := backoff.Schedule{First: c.opt.Poll, Max: 30 * time.Second, Jitter: backoff.DefaultJitter, Rand: c.opt.Rand}.Start()
	for ctx.Err() == nil {
		took, countErr, err := c.answerOne(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if serr := c.answered(ctx, took, countErr, err); serr != nil {
			return serr // stalled past the limit: the process ends (R-L8)
		}
		wait := c.opt.Poll
		switch {
		case err != nil:
			wait = retry.Next()
			c.opt.Logger.Warn("answering mailbox census", "err", err, "retry_in", wait)
		case took:
			retry.Reset()
			continue
		default:
			retry.Reset()
		}
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
	}
	return nil
}

// claimCensusQuery takes the oldest PENDING request nobody is counting (or
// whose counter died: taken before $2) and marks it taken.
const claimCensusQuery = `
UPDATE mailbox_census SET started_at = $1
WHERE id = (SELECT id FROM mailbox_census
	WHERE state = 'PENDING' AND (started_at IS NULL OR started_at < $2)
	ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, COALESCE(start_id, 0)`

// answered reports one round of the loop to its tracker and returns an
// error wrapping progress.ErrStalled once the loop has been stalled for
// the stall limit. A refusal no wait cures stalls the loop: PostgreSQL
// refusing the census table (pgRefused) or the mailbox refusing the
// census's reads (mysqlutil.AccessRefused; the request is FAILED with it
// all the same). A count the mailbox answered clears any stall, and a
// round PostgreSQL answered clears one that PostgreSQL caused. A stall the
// mailbox caused is looked at again every round without a request (a
// probe of the census's first read), so that a restored grant clears it
// without waiting for the next census. An unreachable dependency is an
// outage (R-L2): it neither stalls the loop nor clears a stall.
func (c *Census) answered(ctx context.Context, took bool, countErr, err error) error {
	t := c.progress
	switch {
	case pgRefused(err):
		t.Stalled(err)
	case mysqlutil.AccessRefused(countErr):
		t.Stalled(countErr)
	case err != nil:
	case took && countErr == nil:
		t.Progressed()
	default:
		_, cause := t.StalledFor()
		switch {
		case pgRefused(cause):
			t.Progressed()
		case mysqlutil.AccessRefused(cause) && !took:
			if perr := c.probe(ctx); perr == nil {
				t.Progressed()
			} else if mysqlutil.AccessRefused(perr) {
				t.Stalled(perr)
			}
		}
	}
	return t.Exceeded(c.opt.StallLimit)
}

// probe asks the mailbox the census's first question, bounded by
// QueryTimeout, and returns its error.
func (c *Census) probe(ctx context.Context) error {
	var next int64
	qctx, cancel := context.WithTimeout(ctx, c.opt.QueryTimeout)
	defer cancel()
	if err := c.opt.Mailbox.QueryRowContext(qctx, censusNextID).Scan(&next); err != nil {
		return fmt.Errorf("counting the next ID in the mailbox: %w", err)
	}
	return nil
}

// AnswerOne claims one PENDING request, counts it and records its figures
// or, when the mailbox did not answer, FAILED with the error. took is false
// when no request was waiting; err is a PostgreSQL failure.
func (c *Census) AnswerOne(ctx context.Context) (took bool, err error) {
	took, _, err = c.answerOne(ctx)
	return took, err
}

// answerOne is AnswerOne that also returns the mailbox's error of a
// request it recorded FAILED, for the loop's progress.
func (c *Census) answerOne(ctx context.Context) (took bool, countErr, err error) {
	now := c.opt.Clock.Now()
	var id, start int64
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = c.opt.Pool.QueryRow(qctx, claimCensusQuery, now, now.Add(-2*c.opt.QueryTimeout)).Scan(&id, &start)
	cancel()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil, nil
	case err != nil:
		return false, nil, fmt.Errorf("claiming mailbox census: %w", err)
	}
	f, countErr := c.count(ctx, start)
	if ctx.Err() != nil {
		// Shutting down: the request stays PENDING and is taken again
		// once its claim is stale.
		return true, nil, nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if countErr != nil {
		c.opt.Logger.Warn("mailbox census failed", "census_id", id, "start_id", start, "err", countErr)
		_, err = c.opt.Pool.Exec(wctx, `UPDATE mailbox_census SET state = 'FAILED', finished_at = $2, error = $3 WHERE id = $1`,
			id, c.opt.Clock.Now(), countErr.Error())
	} else {
		c.opt.Logger.Info("mailbox census counted", "census_id", id, "start_id", start, "next_id", f.nextID,
			"rows_from_start", f.rowsFromStart, "after_last_marked", f.afterLastMarked,
			"unmarked_from_start", f.unmarkedFromStart, "unmarked_below_start", f.unmarkedBelowStart)
		_, err = c.opt.Pool.Exec(wctx, `UPDATE mailbox_census SET state = 'DONE', finished_at = $2, next_id = $3, rows_from_start = $4,
			after_last_marked = $5, unmarked_from_start = $6, unmarked_below_start = $7 WHERE id = $1`,
			id, c.opt.Clock.Now(), f.nextID, f.rowsFromStart, f.afterLastMarked, f.unmarkedFromStart, f.unmarkedBelowStart)
	}
	if err != nil {
		return true, countErr, fmt.Errorf("recording mailbox census %d: %w", id, err)
	}
	return true, countErr, nil
}

// censusFigures are one census's answers; the three counts at a start are
// nil without one.
type censusFigures struct {
	nextID, afterLastMarked                              int64
	rowsFromStart, unmarkedFromStart, unmarkedBelowStart *int64
}

// The census's queries, the runbook's steps 1–5 (docs/runbook.md "Taking
// over from the predecessor"). They read only CMINMSGS_ID and
// CMINMSGS_DATE_PROCESSED, the columns deploy/grants/mysql.sql grants the
// dispatcher to SELECT.
const (
	censusNextID          = `SELECT COALESCE(MAX(CMINMSGS_ID), 0) + 1 FROM CMINMSGS`
	censusAfterLastMarked = `SELECT COALESCE(MAX(CMINMSGS_ID), 0) + 1 FROM CMINMSGS WHERE CMINMSGS_DATE_PROCESSED IS NOT NULL`
	censusAtStart         = `SELECT COUNT(*), COALESCE(SUM(CMINMSGS_DATE_PROCESSED IS NULL), 0) FROM CMINMSGS WHERE CMINMSGS_ID >= ?`
	censusUnmarkedBelow   = `SELECT COUNT(*) FROM CMINMSGS WHERE CMINMSGS_ID < ? AND CMINMSGS_DATE_PROCESSED IS NULL`
)

// count asks the mailbox the census's questions, each bounded by
// QueryTimeout.
func (c *Census) count(ctx context.Context, start int64) (censusFigures, error) {
	var f censusFigures
	one := func(what, query string, dest []any, args ...any) error {
		qctx, cancel := context.WithTimeout(ctx, c.opt.QueryTimeout)
		defer cancel()
		if err := c.opt.Mailbox.QueryRowContext(qctx, query, args...).Scan(dest...); err != nil {
			return fmt.Errorf("counting %s in the mailbox: %w", what, err)
		}
		return nil
	}
	if err := one("the next ID", censusNextID, []any{&f.nextID}); err != nil {
		return f, err
	}
	if err := one("the ID after the last marked row", censusAfterLastMarked, []any{&f.afterLastMarked}); err != nil {
		return f, err
	}
	if start == 0 {
		return f, nil
	}
	var rows, unmarked, below int64
	if err := one("the rows from the start", censusAtStart, []any{&rows, &unmarked}, start); err != nil {
		return f, err
	}
	if err := one("the unmarked rows below the start", censusUnmarkedBelow, []any{&below}, start); err != nil {
		return f, err
	}
	f.rowsFromStart, f.unmarkedFromStart, f.unmarkedBelowStart = &rows, &unmarked, &below
	return f, nil
}
