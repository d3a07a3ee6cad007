package leasetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"msgexchange/libs/lease"
)

// Client is a lease.Client that keeps the leases directly in the lease
// table of a migrated test database, so that components under test get
// real terms that msgx_fence checks, without a control plane. Its
// statements decide like the control plane's (services/control/internal/
// lease, where the server itself is tested): a free or expired lease
// starts a new term with token + 1, the caller's live term keeps its
// token, a live term of another holder is ErrHeld, renewing an ended term
// is ErrLost. It writes no audit rows.
type Client struct {
	db *pgxpool.Pool
}

var _ lease.Client = (*Client)(nil)

// NewClient returns a Client on db.
func NewClient(db *pgxpool.Pool) *Client { return &Client{db: db} }

// Acquire starts or keeps holder's term of name. Like the control plane,
// it locks the row FOR UPDATE first: the fence's key-share lock does not
// conflict with the acquiring UPDATE itself (no key column changes), and
// a new term must not begin between another holder's fence and its commit
// (migration 00038).
func (c *Client) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Grant, error) {
	var g lease.Grant
	err := pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT FROM lease WHERE name = $1 FOR UPDATE`, name); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
		WITH n AS (SELECT clock_timestamp() AS now)
		INSERT INTO lease AS l (name, holder, token, acquired_at, renewed_at, expires_at)
		SELECT $1, $2, 1, n.now, n.now, n.now + $3::bigint * interval '1 microsecond' FROM n
		ON CONFLICT (name) DO UPDATE SET
			token = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > EXCLUDED.renewed_at THEN l.token ELSE l.token + 1 END,
			holder = EXCLUDED.holder, renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at, released_at = NULL
		WHERE l.expires_at <= EXCLUDED.renewed_at OR l.holder = EXCLUDED.holder
		RETURNING l.token, l.expires_at`, name, holder, ttl.Microseconds()).Scan(&g.Token, &g.ExpiresAt)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return lease.Grant{}, fmt.Errorf("acquiring lease %s: %w", name, lease.ErrHeld)
	}
	if err != nil {
		return lease.Grant{}, fmt.Errorf("acquiring lease %s: %w", name, err)
	}
	return g, nil
}

// Renew extends holder's live term token.
func (c *Client) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (time.Time, error) {
	var exp time.Time
	err := c.db.QueryRow(ctx, `
		UPDATE lease SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
		WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp()
		RETURNING expires_at`, name, holder, token, ttl.Microseconds()).Scan(&exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("renewing lease %s token %d: %w", name, token, lease.ErrLost)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renewing lease %s token %d: %w", name, token, err)
	}
	return exp, nil
}

// Release ends holder's live term token.
func (c *Client) Release(ctx context.Context, name, holder string, token int64) (bool, error) {
	tag, err := c.db.Exec(ctx, `
		UPDATE lease SET expires_at = clock_timestamp(), released_at = clock_timestamp()
		WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp()`, name, holder, token)
	if err != nil {
		return false, fmt.Errorf("releasing lease %s token %d: %w", name, token, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ForceRelease ends the live term of name, whoever holds it, as an
// operator's `msgxctl lease force-release` does; the holder learns of it
// only at its next renewal or fenced write. It reports whether a term was
// live.
func (c *Client) ForceRelease(ctx context.Context, name string) (bool, error) {
	tag, err := c.db.Exec(ctx, `
		UPDATE lease SET expires_at = clock_timestamp(), released_at = clock_timestamp()
		WHERE name = $1 AND expires_at > clock_timestamp()`, name)
	if err != nil {
		return false, fmt.Errorf("force-releasing lease %s: %w", name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Holder returns the holder and token of name's live term, or "" and 0.
func (c *Client) Holder(ctx context.Context, name string) (string, int64, error) {
	var holder string
	var token int64
	err := c.db.QueryRow(ctx, `SELECT holder, token FROM lease WHERE name = $1 AND expires_at > clock_timestamp()`, name).Scan(&holder, &token)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading lease %s: %w", name, err)
	}
	return holder, token, nil
}
