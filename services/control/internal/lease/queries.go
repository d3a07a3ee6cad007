package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/caller"
)

// The audit actions, as stored in lease_audit.action.
const (
	actionAcquire      = "acquire"
	actionRenewLost    = "renew-lost"
	actionRelease      = "release"
	actionForceRelease = "force-release"
	actionExpire       = "expire"
	actionDenied       = "denied"
)

// row is one lease row with PostgreSQL's clock at the moment it was locked.
type row struct {
	name, holder string
	// principal is the principal that acquired the term; nil for a term
	// begun before terms were bound to principals.
	principal  *string
	token      int64
	acquiredAt time.Time
	renewedAt  time.Time
	expiresAt  time.Time
	releasedAt *time.Time
	now        time.Time
}

// live reports whether the row's term runs at its read time.
func (r *row) live() bool { return r.expiresAt.After(r.now) }

// describe is the row's term for messages: "holder H until T" while the
// term is live — its fencing token goes only to the holder that acquired
// it (R-H9) — and "holder H token N ended T" once it has ended.
func (r *row) describe() string {
	if r.live() {
		return fmt.Sprintf("holder %s until %s", r.holder, r.expiresAt.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("holder %s token %d ended %s", r.holder, r.token, r.expiresAt.UTC().Format(time.RFC3339Nano))
}

// boundElsewhere reports whether the live term of holder is bound to
// another principal than p: the one case in which naming the holder is
// an impersonation.
func (r *row) boundElsewhere(holder, p string) bool {
	return r != nil && r.live() && r.holder == holder && r.principal != nil && *r.principal != p
}

// visibleToken is the row's token as a caller may see it: the token of a
// live term only to the principal that acquired it, 0 (unknown) to
// everyone else; an ended term's token is history and always visible.
func (r *row) visibleToken(p string) int64 {
	if r.live() && (r.principal == nil || *r.principal != p) {
		return 0
	}
	return r.token
}

// rowColumns are the lease columns scanRow reads, then clock_timestamp().
const rowColumns = `name, holder, principal, token, acquired_at, renewed_at, expires_at, released_at, clock_timestamp()`

func scanRow(r pgx.Row) (*row, error) {
	var out row
	if err := r.Scan(&out.name, &out.holder, &out.principal, &out.token, &out.acquiredAt, &out.renewedAt, &out.expiresAt, &out.releasedAt, &out.now); err != nil {
		return nil, err
	}
	return &out, nil
}

// setLockTimeout bounds every lock wait of tx.
func setLockTimeout(ctx context.Context, tx pgx.Tx, d time.Duration) error {
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, lockTimeoutSetting(d)); err != nil {
		return fmt.Errorf("setting lock timeout: %w", err)
	}
	return nil
}

// lockRow locks the lease row of name FOR UPDATE and returns it, or nil
// when there is none. Holding the lock, the statements that follow in tx
// see exactly this row, and their clock_timestamp() is later than its now.
func lockRow(ctx context.Context, tx pgx.Tx, name string) (*row, error) {
	r, err := scanRow(tx.QueryRow(ctx, `SELECT `+rowColumns+` FROM lease WHERE name = $1 FOR UPDATE`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("locking lease %s: %w", name, err)
	}
	return r, nil
}

// peek reads the lease row of name without locking it, or nil when there
// is none: one statement outside any transaction, one round trip.
func (s *Server) peek(ctx context.Context, name string) (*row, error) {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	r, err := scanRow(s.db.QueryRow(qctx, `SELECT `+rowColumns+` FROM lease WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading lease %s: %w", name, err)
	}
	return r, nil
}

// acquireSQL is the acquisition, decided by one statement: insert the lease
// when it does not exist (token: one more than any token ever recorded for
// the name), else take it over when its term has ended or the caller holds
// it under the principal that acquired it. A new term (anything but the
// caller's own live term) gets token + 1, acquired_at = now and the
// caller's principal; the caller's live term keeps its token and
// acquired_at. No row is returned when another holder's term is live, or
// when the holder's live term is bound to another principal.
// $1 name, $2 holder, $3 ttl in microseconds, $4 principal.
const acquireSQL = `
WITH c AS (SELECT clock_timestamp() AS now)
INSERT INTO lease AS l (name, holder, principal, token, acquired_at, renewed_at, expires_at, released_at)
SELECT $1, $2, $4, COALESCE((SELECT max(token) FROM lease_audit WHERE name = $1), 0) + 1,
       c.now, c.now, c.now + $3::bigint * interval '1 microsecond', NULL
FROM c
ON CONFLICT (name) DO UPDATE SET
    token       = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > EXCLUDED.renewed_at
                       THEN l.token ELSE l.token + 1 END,
    acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > EXCLUDED.renewed_at
                       THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
    holder      = EXCLUDED.holder,
    principal   = EXCLUDED.principal,
    renewed_at  = EXCLUDED.renewed_at,
    expires_at  = EXCLUDED.expires_at,
    released_at = NULL
WHERE l.expires_at <= EXCLUDED.renewed_at
   OR (l.holder = EXCLUDED.holder AND (l.principal IS NULL OR l.principal = EXCLUDED.principal))
RETURNING ` + rowColumns + `, l.acquired_at = l.renewed_at`

// renewSQL extends the caller's live term; a term begun before terms were
// bound to principals is bound to the first principal that renews it.
// $1 name, $2 holder, $3 token, $4 ttl in microseconds, $5 principal.
const renewSQL = `
WITH c AS (SELECT clock_timestamp() AS now)
UPDATE lease l SET renewed_at = c.now, expires_at = c.now + $4::bigint * interval '1 microsecond',
    principal = COALESCE(l.principal, $5)
FROM c
WHERE l.name = $1 AND l.holder = $2 AND l.token = $3 AND l.expires_at > c.now
  AND (l.principal IS NULL OR l.principal = $5)
RETURNING l.expires_at`

// releaseSQL ends the caller's live term now. $1 name, $2 holder, $3 token,
// $4 principal.
const releaseSQL = `
WITH c AS (SELECT clock_timestamp() AS now)
UPDATE lease l SET expires_at = c.now, released_at = c.now
FROM c
WHERE l.name = $1 AND l.holder = $2 AND l.token = $3 AND l.expires_at > c.now
  AND (l.principal IS NULL OR l.principal = $4)
RETURNING l.name`

// forceReleaseSQL ends the live term of $1, whoever holds it; the token is
// kept, so the next acquirer gets token + 1.
const forceReleaseSQL = `
WITH c AS (SELECT clock_timestamp() AS now)
UPDATE lease l SET expires_at = c.now, released_at = c.now
FROM c
WHERE l.name = $1 AND l.expires_at > c.now
RETURNING l.name`

// audit records one lease_audit row, with the principal and peer of the
// call that caused it (R-H9), and returns it.
func audit(ctx context.Context, tx pgx.Tx, c caller.Caller, name, action, holder string, token int64, operator, reason string) (*controlv1.LeaseAuditEntry, error) {
	var (
		e  controlv1.LeaseAuditEntry
		at time.Time
	)
	err := tx.QueryRow(ctx, `
		INSERT INTO lease_audit (name, action, holder, token, operator, reason, principal, peer)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7, $8)
		RETURNING id, at`, name, action, holder, token, operator, reason, c.Principal, c.Peer).Scan(&e.Id, &at)
	if err != nil {
		return nil, fmt.Errorf("recording lease %s %s: %w", name, action, err)
	}
	if action == actionDenied {
		return nil, nil // never returned by the API, which has no enum value for it
	}
	act, err := actionFromDB(action)
	if err != nil {
		return nil, err
	}
	e.At, e.Name, e.Action, e.Holder, e.Token, e.Operator, e.Reason = timestamppb.New(at), name, act, holder, token, operator, reason
	return &e, nil
}

// actionFromDB maps "force-release" to LEASE_ACTION_FORCE_RELEASE; a value
// without an enum counterpart is a contract mismatch.
func actionFromDB(v string) (controlv1.LeaseAction, error) {
	n, ok := controlv1.LeaseAction_value["LEASE_ACTION_"+strings.ToUpper(strings.ReplaceAll(v, "-", "_"))]
	if !ok || n == 0 {
		return 0, fmt.Errorf("mapping lease action %q from the database: %w", v, errContractMismatch)
	}
	return controlv1.LeaseAction(n), nil
}

// toProto converts a row as principal p may see it (visibleToken);
// remaining and held are relative to the row's now.
func (r *row) toProto(p string) *controlv1.Lease {
	l := &controlv1.Lease{
		Name:       r.name,
		Holder:     r.holder,
		Token:      r.visibleToken(p),
		AcquiredAt: timestamppb.New(r.acquiredAt),
		RenewedAt:  timestamppb.New(r.renewedAt),
		ExpiresAt:  timestamppb.New(r.expiresAt),
		Remaining:  durationpb.New(max(r.expiresAt.Sub(r.now), 0)),
		Held:       r.live(),
	}
	if r.releasedAt != nil {
		l.ReleasedAt = timestamppb.New(*r.releasedAt)
	}
	return l
}
