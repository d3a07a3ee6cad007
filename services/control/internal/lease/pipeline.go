package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgexchange/services/control/internal/caller"
)

// pipeTx is one transaction whose statements travel to PostgreSQL in
// pipelines: each send is one round trip however many statements it holds.
// A lease call is then as slow as one or two round trips whatever the
// path's latency — a term kept alive by renewals whose cost grew with the
// round trips would expire merely because PostgreSQL is far away (R-M2).
// The first send begins the transaction and sets the lock timeout; the
// send that commits ends it. A transaction left open by a failure is
// rolled back by the pool, which closes a connection returned inside a
// transaction.
type pipeTx struct {
	conn        *pgxpool.Conn
	lockTimeout time.Duration
	begun       bool
}

func (s *Server) pipe(ctx context.Context) (*pipeTx, error) {
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return &pipeTx{conn: conn, lockTimeout: s.lockTimeout}, nil
}

// send runs b's statements (their callbacks read the results) in one round
// trip, after BEGIN and the lock timeout on the first send and followed by
// COMMIT when commit is set.
func (p *pipeTx) send(ctx context.Context, b *pgx.Batch, commit bool) error {
	full := &pgx.Batch{}
	if !p.begun {
		full.Queue("BEGIN")
		full.Queue(`SELECT set_config('lock_timeout', $1, true)`, lockTimeoutSetting(p.lockTimeout))
		p.begun = true
	}
	full.QueuedQueries = append(full.QueuedQueries, b.QueuedQueries...)
	if commit {
		full.Queue("COMMIT")
	}
	return p.conn.SendBatch(ctx, full).Close()
}

// release returns the connection to the pool.
func (p *pipeTx) release() { p.conn.Release() }

// lockTimeoutSetting is d as a lock_timeout value, whole milliseconds
// rounded up, at least 1 ms (0 would mean no timeout).
func lockTimeoutSetting(d time.Duration) string {
	return fmt.Sprintf("%dms", max((d+time.Millisecond-1)/time.Millisecond, 1))
}

// queueLockRow queues lockRow's statement; *dst is the row, or nil when
// there is none.
func queueLockRow(b *pgx.Batch, name string, dst **row) {
	b.Queue(`SELECT `+rowColumns+` FROM lease WHERE name = $1 FOR UPDATE`, name).QueryRow(func(r pgx.Row) error {
		got, err := scanRow(r)
		if errors.Is(err, pgx.ErrNoRows) {
			*dst = nil
			return nil
		}
		if err != nil {
			return fmt.Errorf("locking lease %s: %w", name, err)
		}
		*dst = got
		return nil
	})
}

// queueAudit queues a lease_audit row of an acquire, expire, release or
// denied action (those whose entry the API does not return).
func queueAudit(b *pgx.Batch, c caller.Caller, name, action, holder string, token int64, reason string) {
	b.Queue(`INSERT INTO lease_audit (name, action, holder, token, reason, principal, peer)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7)`, name, action, holder, token, reason, c.Principal, c.Peer)
}

// renewOneTrip renews holder's live term token in one round trip. ok is
// false when the statement changed nothing (the term ended, or it is bound
// to another principal): the caller then takes the transaction that finds
// out which and audits it.
func (s *Server) renewOneTrip(ctx context.Context, c caller.Caller, name, holder string, token int64, ttl time.Duration) (expires time.Time, ok bool, err error) {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	p, err := s.pipe(qctx)
	if err != nil {
		return time.Time{}, false, err
	}
	defer p.release()
	b := &pgx.Batch{}
	b.Queue(renewSQL, name, holder, token, ttl.Microseconds(), c.Principal).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("renewing lease %s: %w", name, err)
		}
		ok = true
		return nil
	})
	if err := p.send(qctx, b, true); err != nil {
		return time.Time{}, false, err
	}
	return expires, ok, nil
}

// releaseOneTripSQL is releaseSQL with its audit row, in one statement.
// $1 name, $2 holder, $3 token, $4 principal, $5 peer.
const releaseOneTripSQL = `
WITH r AS (` + releaseSQL + `)
INSERT INTO lease_audit (name, action, holder, token, principal, peer)
SELECT r.name, '` + actionRelease + `', $2, $3, $4, $5 FROM r
RETURNING name`

// releaseOneTrip ends holder's live term token in one round trip. ok is
// false when the statement changed nothing: the caller then takes the
// transaction that tells a term already over from one bound to another
// principal.
func (s *Server) releaseOneTrip(ctx context.Context, c caller.Caller, name, holder string, token int64) (ok bool, err error) {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	p, err := s.pipe(qctx)
	if err != nil {
		return false, err
	}
	defer p.release()
	b := &pgx.Batch{}
	b.Queue(releaseOneTripSQL, name, holder, token, c.Principal, c.Peer).QueryRow(func(r pgx.Row) error {
		var n string
		err := r.Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("releasing lease %s: %w", name, err)
		}
		ok = true
		return nil
	})
	if err := p.send(qctx, b, true); err != nil {
		return false, err
	}
	return ok, nil
}

// acquireTx decides an acquisition in two round trips (after Acquire's
// unlocked read, which refuses another holder's live term by itself) and
// hands its outcome to done: the row acquired (nil when refused) and whether it is a
// new term, the previous term, the live term of another holder that
// refused it, and whether the call named the holder of a live term bound
// to another principal. The first trip locks the lease row (the previous
// term, for the audit) and runs the acquisition statement, which itself
// refuses another holder's live term and a term bound to another
// principal, so running it before looking at the row changes nothing that
// looking would have prevented. The second writes the audit and commits.
func (s *Server) acquireTx(ctx context.Context, c caller.Caller, name, holder string, ttl time.Duration, done func(got *row, newTerm bool, prev, current *row, denied bool)) error {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	p, err := s.pipe(qctx)
	if err != nil {
		return err
	}
	defer p.release()
	var (
		prev, current *row
		r             row
		found         bool
		newTerm       bool
	)
	b := &pgx.Batch{}
	// The FOR UPDATE is what keeps a new term out while a fenced commit is
	// in flight: the fence's FOR KEY SHARE (migration 00038) does not
	// conflict with acquireSQL's own update, which changes no key column
	// (TestFence_R_B8_R_M5_RenewalDoesNotWaitButATakeoverDoes).
	queueLockRow(b, name, &prev)
	b.Queue(acquireSQL, name, holder, ttl.Microseconds(), c.Principal).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&r.name, &r.holder, &r.principal, &r.token, &r.acquiredAt, &r.renewedAt, &r.expiresAt, &r.releasedAt, &r.now, &newTerm)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("acquiring lease %s: %w", name, err)
		}
		found = true
		return nil
	})
	if err := p.send(qctx, b, false); err != nil {
		return err
	}
	b = &pgx.Batch{}
	denied := false
	switch {
	case found:
		// The statement's clock is later than the lock's: a term that
		// was live at the lock and ran out before the statement is taken
		// over lawfully.
		if newTerm {
			if prev != nil && prev.releasedAt == nil {
				queueAudit(b, c, name, actionExpire, prev.holder, prev.token, fmt.Sprintf("term ran out at %s without release; next term token %d by %s",
					prev.expiresAt.UTC().Format(time.RFC3339Nano), r.token, holder))
			}
			queueAudit(b, c, name, actionAcquire, holder, r.token, "")
		}
	case prev.boundElsewhere(holder, c.Principal):
		denied, current = true, prev
		queueAudit(b, c, name, actionDenied, holder, prev.token, "acquire of a live term bound to another principal")
	case prev != nil:
		current = prev
	default:
		// Inserted concurrently after the lock was tried.
		queueLockRow(b, name, &current)
	}
	if err := p.send(qctx, b, true); err != nil {
		return err
	}
	var got *row
	if found {
		got = &r
	}
	done(got, newTerm, prev, current, denied)
	return nil
}
