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
)

// The audit actions, as stored in lease_audit.action.
const (
	actionAcquire      = "acquire"
	actionRenewLost    = "renew-lost"
	actionRelease      = "release"
	actionForceRelease = "force-release"
	actionExpire       = "expire"
)

// row is one lease row with PostgreSQL's clock at the moment it was locked.
type row struct {
	name, holder string
	token        int64
	acquiredAt   time.Time
	renewedAt    time.Time
	expiresAt    time.Time
	releasedAt   *time.Time
	now          time.Time
}

// live reports whether the row's term runs at its read time.
func (r *row) live() bool { return r.expiresAt.After(r.now) }

// describe is the row's term for messages: "holder H token N until T".
func (r *row) describe() string {
	state := "until"
	if !r.live() {
		state = "ended"
	}
	return fmt.Sprintf("holder %s token %d %s %s", r.holder, r.token, state, r.expiresAt.UTC().Format(time.RFC3339Nano))
}

// rowColumns are the lease columns scanRow reads, then clock_timestamp().
const rowColumns = `name, holder, token, acquired_at, renewed_at, expires_at, released_at, clock_timestamp()`

func scanRow(r pgx.Row) (*row, error) {
	var out row
	if err := r.Scan(&out.name, &out.holder, &out.token, &out.acquiredAt, &out.renewedAt, &out.expiresAt, &out.releasedAt, &out.now); err != nil {
		return nil, err
	}
	return &out, nil
}

// setLockTimeout bounds every lock wait of tx.
func setLockTimeout(ctx context.Context, tx pgx.Tx, d time.Duration) error {
	ms := max((d+time.Millisecond-1)/time.Millisecond, 1)
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", ms)); err != nil {
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

// acquireSQL is the acquisition, decided by one statement: insert the lease
// when it does not exist (token: one more than any token ever recorded for
// the name), else take it over when its term has ended or the caller holds
// it. A new term (anything but the caller's own live term) gets token + 1
// and acquired_at = now; the caller's live term keeps its token and
// acquired_at. No row is returned when another holder's term is live.
// $1 name, $2 holder, $3 ttl in microseconds.
const acquireSQL = `
WITH c AS (SELECT clock_timestamp() AS now)
INSERT INTO lease AS l (name, holder, token, acquired_at, renewed_at, expires_at, released_at)
SELECT $1, $2, COALESCE((SELECT max(token) FROM lease_audit WHERE name = $1), 0) + 1,
       c.now, c.now, c.now + $3::bigint * interval '1 microsecond', NULL
FROM c
ON CONFLICT (name) DO UPDATE SET
    token       = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > EXCLUDED.renewed_at
                       THEN l.token ELSE l.token + 1 END,
    acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > EXCLUDED.renewed_at
                       THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
    holder      = EXCLUDED.holder,
    renewed_at  = EXCLUDED.renewed_at,
    expires_at  = EXCLUDED.expires_at,
    released_at = NULL
WHERE l.expires_at <= EXCLUDED.renewed_at OR l.holder = EXCLUDED.holder
RETURNING ` + rowColumns + `, l.acquired_at = l.renewed_at`

// renewSQL extends the caller's live term. $1 name, $2 holder, $3 token,
// $4 ttl in microseconds.
const renewSQL = `
WITH c AS (SELECT clock_timestamp() AS now)
UPDATE lease l SET renewed_at = c.now, expires_at = c.now + $4::bigint * interval '1 microsecond'
FROM c
WHERE l.name = $1 AND l.holder = $2 AND l.token = $3 AND l.expires_at > c.now
RETURNING l.expires_at`

// releaseSQL ends the caller's live term now. $1 name, $2 holder, $3 token.
const releaseSQL = `
WITH c AS (SELECT clock_timestamp() AS now)
UPDATE lease l SET expires_at = c.now, released_at = c.now
FROM c
WHERE l.name = $1 AND l.holder = $2 AND l.token = $3 AND l.expires_at > c.now
RETURNING l.name`

// forceReleaseSQL ends the live term of $1, whoever holds it; the token is
// kept, so the next acquirer gets token + 1.
const forceReleaseSQL = `
WITH c AS (SELECT clock_timestamp() AS now)
UPDATE lease l SET expires_at = c.now, released_at = c.now
FROM c
WHERE l.name = $1 AND l.expires_at > c.now
RETURNING l.name`

// audit records one lease_audit row and returns it.
func audit(ctx context.Context, tx pgx.Tx, name, action, holder string, token int64, operator, reason string) (*controlv1.LeaseAuditEntry, error) {
	var (
		e  controlv1.LeaseAuditEntry
		at time.Time
	)
	err := tx.QueryRow(ctx, `
		INSERT INTO lease_audit (name, action, holder, token, operator, reason)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''))
		RETURNING id, at`, name, action, holder, token, operator, reason).Scan(&e.Id, &at)
	if err != nil {
		return nil, fmt.Errorf("recording lease %s %s: %w", name, action, err)
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

// toProto converts a row; remaining and held are relative to the row's now.
func (r *row) toProto() *controlv1.Lease {
	l := &controlv1.Lease{
		Name:       r.name,
		Holder:     r.holder,
		Token:      r.token,
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
