package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	leaseapi "msgexchange/libs/lease"
	"msgexchange/libs/pgxutil"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	operatoraudit "msgexchange/services/control/internal/audit"
	"msgexchange/services/control/internal/caller"
)

// Limits of the arguments.
const (
	// MinTTL and MaxTTL bound a requested time to live.
	MinTTL = 50 * time.Millisecond
	MaxTTL = time.Hour
	// DefaultLockTimeout is how long a call waits for the lease row's lock
	// before it fails with ABORTED: longer than a fenced transaction's
	// commit, much shorter than a standby's retry interval.
	DefaultLockTimeout = time.Second
	maxNameLen         = 200
)

// auditPurpose says, in the message of a missing operator or reason, what
// is recorded.
const auditPurpose = "who force-releases a lease and why is recorded in the lease audit"

// SQLSTATEs that mean "try again": the lock timeout ran out (55P03) or a
// deadlock was broken (40P01).
const (
	sqlLockNotAvailable = "55P03"
	sqlDeadlock         = "40P01"
)

// Server implements controlv1.LeaseServiceServer over PostgreSQL.
type Server struct {
	controlv1.UnimplementedLeaseServiceServer

	db           *pgxpool.Pool
	logger       *slog.Logger
	queryTimeout time.Duration
	lockTimeout  time.Duration
}

// NewServer returns a Server keeping leases in db. queryTimeout bounds each
// call's database work; lockTimeout bounds its wait for the lease row's
// lock (DefaultLockTimeout in production).
func NewServer(db *pgxpool.Pool, logger *slog.Logger, queryTimeout, lockTimeout time.Duration) *Server {
	return &Server{db: db, logger: logger, queryTimeout: queryTimeout, lockTimeout: lockTimeout}
}

// Acquire starts a new term of a free lease or renews the caller's own.
// The token of a live term goes back only to the principal that acquired
// it: naming the holder of another principal's live term is refused
// (PERMISSION_DENIED, audited as denied), and a refusal because the lease
// is held never carries the holder's token (R-H9).
func (s *Server) Acquire(ctx context.Context, req *controlv1.AcquireLeaseRequest) (*controlv1.AcquireLeaseResponse, error) {
	errs := append(identErrors(req.GetName(), req.GetHolder()), ttlErrors(req.GetTtl().AsDuration(), req.GetTtl() == nil)...)
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	c := caller.From(ctx)
	name, holder := req.GetName(), req.GetHolder()
	ctx = finishWhenAbandoned(ctx)
	if !c.MayHoldLease(name) {
		return nil, s.outOfScope(ctx, "acquire", name, holder, c)
	}
	// Another holder's live term is refused from a plain read, without the
	// row lock acquireTx takes: the lock would wait for the holder's fenced
	// commit in flight (FOR UPDATE conflicts with the fence's FOR KEY
	// SHARE), and the holder's fences asked for meanwhile would queue
	// behind it, while a standby asks every Retry. A term that ends just
	// after this read is taken at the caller's next attempt; a takeover
	// always goes through acquireTx's lock.
	seen, err := s.peek(ctx, name)
	if err != nil {
		return nil, s.queryError("acquiring lease", err, "lease", name, "holder", holder, "principal", c.Principal, "peer", c.Peer)
	}
	if seen != nil && seen.live() && seen.holder != holder {
		return nil, heldStatus(name, seen)
	}
	var (
		got     *row
		newTerm bool
		prev    *row
		current *row // set when another holder's term is live
		denied  bool
	)
	err = s.acquireTx(ctx, c, name, holder, req.GetTtl().AsDuration(), func(g *row, n bool, p, cur *row, d bool) {
		got, newTerm, prev, current, denied = g, n, p, cur, d
	})
	if err != nil {
		return nil, s.queryError("acquiring lease", err, "lease", name, "holder", holder, "principal", c.Principal, "peer", c.Peer)
	}
	if denied {
		return nil, s.denied("acquire", name, holder, c, current)
	}
	if got == nil {
		return nil, heldStatus(name, current)
	}
	if newTerm {
		attrs := []any{"lease", name, "holder", holder, "principal", c.Principal, "peer", c.Peer, "token", got.token, "expires_at", got.expiresAt}
		if prev != nil {
			attrs = append(attrs, "previous_holder", prev.holder, "previous_token", prev.token, "previous_released", prev.releasedAt != nil)
		}
		s.logger.Info("lease acquired", attrs...)
	}
	return &controlv1.AcquireLeaseResponse{
		Token:      got.token,
		ExpiresAt:  timestamppb.New(got.expiresAt),
		AcquiredAt: timestamppb.New(got.acquiredAt),
		Renewed:    !newTerm,
	}, nil
}

// Renew extends the caller's live term. A renewal of another principal's
// live term is refused (PERMISSION_DENIED) and audited.
func (s *Server) Renew(ctx context.Context, req *controlv1.RenewLeaseRequest) (*controlv1.RenewLeaseResponse, error) {
	errs := append(identErrors(req.GetName(), req.GetHolder()), ttlErrors(req.GetTtl().AsDuration(), req.GetTtl() == nil)...)
	if req.GetToken() <= 0 {
		errs = append(errs, fmt.Errorf("token %d: must be the positive token returned by Acquire", req.GetToken()))
	}
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	c := caller.From(ctx)
	name, holder, token := req.GetName(), req.GetHolder(), req.GetToken()
	ctx = finishWhenAbandoned(ctx)
	if !c.MayHoldLease(name) {
		return nil, s.outOfScope(ctx, "renew", name, holder, c)
	}
	var (
		lost    bool
		denied  bool
		current *row
	)
	expires, renewed, err := s.renewOneTrip(ctx, c, name, holder, token, req.GetTtl().AsDuration())
	if err != nil {
		return nil, s.queryError("renewing lease", err, "lease", name, "holder", holder, "token", token, "principal", c.Principal, "peer", c.Peer)
	}
	if renewed {
		return &controlv1.RenewLeaseResponse{ExpiresAt: timestamppb.New(expires)}, nil
	}
	// Refused: find out why, and audit it.
	err = s.inTx(ctx, func(qctx context.Context, tx pgx.Tx) error {
		var err error
		lost, denied = false, false
		if current, err = lockRow(qctx, tx, name); err != nil {
			return err
		}
		if current.boundElsewhere(holder, c.Principal) {
			denied = true
			_, err = audit(qctx, tx, c, name, actionDenied, holder, token, "", "renewal of a live term bound to another principal")
			return err
		}
		err = tx.QueryRow(qctx, renewSQL, name, holder, token, req.GetTtl().AsDuration().Microseconds(), c.Principal).Scan(&expires)
		if !errors.Is(err, pgx.ErrNoRows) {
			if err != nil {
				return fmt.Errorf("renewing lease %s: %w", name, err)
			}
			return nil
		}
		lost = true
		reason := "no such lease"
		if current != nil {
			reason = "term ended; now " + current.describe()
		}
		_, err = audit(qctx, tx, c, name, actionRenewLost, holder, token, "", reason)
		return err
	})
	if err != nil {
		return nil, s.queryError("renewing lease", err, "lease", name, "holder", holder, "token", token, "principal", c.Principal, "peer", c.Peer)
	}
	if denied {
		return nil, s.denied("renew", name, holder, c, current)
	}
	if lost {
		desc := "no such lease"
		if current != nil {
			desc = current.describe()
		}
		s.logger.Warn("lease renewal refused: term ended", "lease", name, "holder", holder, "token", token, "current", desc,
			"principal", c.Principal, "peer", c.Peer)
		return nil, leaseStatus(leaseapi.ReasonLost, current, "lease %s token %d of %s has ended: %s", name, token, holder, desc)
	}
	return &controlv1.RenewLeaseResponse{ExpiresAt: timestamppb.New(expires)}, nil
}

// Release ends the caller's live term now; it needs the term's token. A
// release of another principal's live term is refused (PERMISSION_DENIED)
// and audited.
func (s *Server) Release(ctx context.Context, req *controlv1.ReleaseLeaseRequest) (*controlv1.ReleaseLeaseResponse, error) {
	errs := identErrors(req.GetName(), req.GetHolder())
	if req.GetToken() <= 0 {
		errs = append(errs, fmt.Errorf("token %d: must be the positive token returned by Acquire", req.GetToken()))
	}
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	c := caller.From(ctx)
	name, holder, token := req.GetName(), req.GetHolder(), req.GetToken()
	ctx = finishWhenAbandoned(ctx)
	if !c.MayHoldLease(name) {
		return nil, s.outOfScope(ctx, "release", name, holder, c)
	}
	var (
		denied  bool
		current *row
	)
	released, err := s.releaseOneTrip(ctx, c, name, holder, token)
	if err != nil {
		return nil, s.queryError("releasing lease", err, "lease", name, "holder", holder, "token", token, "principal", c.Principal, "peer", c.Peer)
	}
	if !released {
		// Nothing released: the term is over, or bound to another principal.
		err = s.inTx(ctx, func(qctx context.Context, tx pgx.Tx) error {
			var err error
			released, denied = false, false
			if current, err = lockRow(qctx, tx, name); err != nil {
				return err
			}
			if current.boundElsewhere(holder, c.Principal) {
				denied = true
				_, err = audit(qctx, tx, c, name, actionDenied, holder, token, "", "release of a live term bound to another principal")
				return err
			}
			var n string
			err = tx.QueryRow(qctx, releaseSQL, name, holder, token, c.Principal).Scan(&n)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("releasing lease %s: %w", name, err)
			}
			released = true
			_, err = audit(qctx, tx, c, name, actionRelease, holder, token, "", "")
			return err
		})
		if err != nil {
			return nil, s.queryError("releasing lease", err, "lease", name, "holder", holder, "token", token, "principal", c.Principal, "peer", c.Peer)
		}
	}
	if denied {
		return nil, s.denied("release", name, holder, c, current)
	}
	if released {
		s.logger.Info("lease released", "lease", name, "holder", holder, "token", token, "principal", c.Principal, "peer", c.Peer)
	}
	return &controlv1.ReleaseLeaseResponse{Released: released}, nil
}

// outOfScope audits, logs and returns the PERMISSION_DENIED of a call for
// a lease the caller's credential is not bound to (R-K7): the token file
// names the leases each service principal may hold, so that one service's
// token cannot take another's lease.
func (s *Server) outOfScope(ctx context.Context, op, name, holder string, c caller.Caller) error {
	reason := fmt.Sprintf("%s by principal %s, whose credential may hold only %s", op, c.Principal, strings.Join(c.Leases, ", "))
	err := s.inTx(ctx, func(qctx context.Context, tx pgx.Tx) error {
		_, err := audit(qctx, tx, c, name, actionDenied, holder, 0, "", reason)
		return err
	})
	if err != nil {
		return s.queryError("recording a refused lease call", err, "lease", name, "holder", holder, "principal", c.Principal, "peer", c.Peer)
	}
	s.logger.Warn("lease call refused: the credential is not bound to this lease", "op", op, "lease", name, "holder", holder,
		"principal", c.Principal, "peer", c.Peer, "leases", c.Leases)
	return status.Errorf(codes.PermissionDenied,
		"lease %s: principal %s may hold only %s (the token file binds each service credential to its lease names)",
		name, c.Principal, strings.Join(c.Leases, ", "))
}

// denied logs and returns the PERMISSION_DENIED of a call naming the
// holder of a live term bound to another principal.
func (s *Server) denied(op, name, holder string, c caller.Caller, current *row) error {
	bound := ""
	if current != nil && current.principal != nil {
		bound = *current.principal
	}
	s.logger.Warn("lease call refused: the term belongs to another principal", "op", op, "lease", name, "holder", holder,
		"principal", c.Principal, "peer", c.Peer, "term_principal", bound)
	return status.Errorf(codes.PermissionDenied,
		"lease %s: the live term of holder %s was acquired by another principal; only that principal may %s it (a holder's term is bound to the credential that acquired it)",
		name, holder, op)
}

// List returns every lease by name. The token of a live term is shown
// only to the principal that acquired it (0 otherwise): the list names
// the holders, and must not hand out their fencing tokens with them.
func (s *Server) List(ctx context.Context, _ *controlv1.ListLeasesRequest) (*controlv1.ListLeasesResponse, error) {
	c := caller.From(ctx)
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	var now time.Time
	if err := s.db.QueryRow(qctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return nil, s.queryError("listing leases", err)
	}
	rows, err := s.db.Query(qctx, `SELECT name, holder, principal, token, acquired_at, renewed_at, expires_at, released_at, $1::timestamptz FROM lease ORDER BY name`, now)
	if err != nil {
		return nil, s.queryError("listing leases", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.Lease, error) {
		l, err := scanRow(r)
		if err != nil {
			return nil, err
		}
		return l.toProto(c.Principal), nil
	})
	if err != nil {
		return nil, s.queryError("listing leases", err)
	}
	return &controlv1.ListLeasesResponse{Leases: list, Now: timestamppb.New(now)}, nil
}

// ForceRelease ends the live term of a lease, whoever holds it, with audit.
func (s *Server) ForceRelease(ctx context.Context, req *controlv1.ForceReleaseLeaseRequest) (*controlv1.ForceReleaseLeaseResponse, error) {
	var errs []error
	if err := nameError(req.GetName()); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, operatoraudit.Validate(req.GetOperator(), req.GetReason(), auditPurpose)...)
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	c := caller.From(ctx)
	name := req.GetName()
	var (
		resp    *controlv1.ForceReleaseLeaseResponse
		missing bool
	)
	err := s.inTx(ctx, func(qctx context.Context, tx pgx.Tx) error {
		resp, missing = nil, false
		before, err := lockRow(qctx, tx, name)
		if err != nil {
			return err
		}
		if before == nil {
			missing = true
			return nil
		}
		var n string
		err = tx.QueryRow(qctx, forceReleaseSQL, name).Scan(&n)
		wasHeld := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("force-releasing lease %s: %w", name, err)
		}
		after, err := lockRow(qctx, tx, name)
		if err != nil {
			return err
		}
		e, err := audit(qctx, tx, c, name, actionForceRelease, before.holder, before.token, req.GetOperator(), req.GetReason())
		if err != nil {
			return err
		}
		resp = &controlv1.ForceReleaseLeaseResponse{Lease: after.toProto(c.Principal), Audit: e, WasHeld: wasHeld}
		return nil
	})
	if err != nil {
		return nil, s.queryError("force-releasing lease", err, "lease", name, "principal", c.Principal, "peer", c.Peer)
	}
	if missing {
		return nil, status.Errorf(codes.NotFound, "lease %s not found: no instance ever acquired it (see msgxctl lease list)", name)
	}
	s.logger.Warn("lease force-released", "lease", name, "holder", resp.GetAudit().GetHolder(), "token", resp.GetAudit().GetToken(),
		"was_held", resp.GetWasHeld(), "operator", req.GetOperator(), "reason", req.GetReason(), "principal", c.Principal, "peer", c.Peer)
	return resp, nil
}

// finishWhenAbandoned is the context of an Acquire, Renew or Release
// call's database work: the call's values (its caller) without its
// cancellation, so the work is bounded by the query timeout alone and
// finishes even when the caller gave up on it. Each of the three is
// idempotent for the caller's holder — an Acquire it repeats renews the
// term the abandoned one started, a Renew extends, a Release ends — and a
// term granted to a holder that is gone ends with its TTL, as any other.
// Cut off by the caller's deadline instead, a statement in flight closes
// its connection with the statements prepared on it: when PostgreSQL is
// far away (R-M2) a cold call — connecting, checking that the server takes
// writes, preparing — is longer than the elector's call timeout, so every
// retry started on a new connection and timed out the same way, and a
// control plane restarted at +200 ms per round trip never granted a lease
// (`make bench`, R-M2's phase, 2026-12-05).
func finishWhenAbandoned(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// inTx runs fn in one transaction bounded by the query timeout, with the
// lock timeout set.
func (s *Server) inTx(ctx context.Context, fn func(qctx context.Context, tx pgx.Tx) error) error {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	return pgxutil.InTx(qctx, s.db, func(tx pgx.Tx) error {
		if err := setLockTimeout(qctx, tx, s.lockTimeout); err != nil {
			return err
		}
		return fn(qctx, tx)
	})
}

// leaseStatus is a FAILED_PRECONDITION with an ErrorInfo detail naming the
// current term (when there is one).
// heldStatus refuses an acquisition because current, another holder's
// term, is live (current nil: its row was not seen).
func heldStatus(name string, current *row) error {
	desc := "held by another holder"
	if current != nil {
		desc = current.describe()
	}
	return leaseStatus(leaseapi.ReasonHeld, current, "lease %s is held: %s", name, desc)
}

func leaseStatus(reason string, current *row, format string, args ...any) error {
	st := status.Newf(codes.FailedPrecondition, format, args...)
	info := &errdetails.ErrorInfo{Reason: reason, Domain: leaseapi.ErrorDomain, Metadata: map[string]string{}}
	if current != nil {
		info.Metadata["holder"] = current.holder
		if !current.live() {
			// A live term's token goes only to its holder (R-H9).
			info.Metadata["token"] = strconv.FormatInt(current.token, 10)
		}
		info.Metadata["expires_at"] = current.expiresAt.UTC().Format(time.RFC3339Nano)
	}
	if withInfo, err := st.WithDetails(info); err == nil {
		st = withInfo
	}
	return st.Err()
}

// queryError turns a database failure into a gRPC status: a lock wait that
// ran out or a broken deadlock is ABORTED (retry), a timeout stays a
// timeout, other SQL errors and contract mismatches are internal (logged
// here; the caller sees only a stable message), anything else means
// PostgreSQL cannot be reached (UNAVAILABLE, retry). No SQL text reaches
// the caller.
// It is rpcstatus.QueryError plus the ABORTED class for the lease row's
// lock, and keeps its own "postgres unreachable" wording.
func (s *Server) queryError(op string, err error, attrs ...any) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == sqlLockNotAvailable || pgErr.Code == sqlDeadlock):
		s.logger.Info(op+" waited too long for the lease row; the caller retries", append(attrs, "err", err)...)
		return status.Errorf(codes.Aborted, "%s: the lease row is locked by a fenced transaction in progress; retry", op)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: the database did not answer in time", op)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: cancelled", op)
	case errors.As(err, &pgErr), errors.Is(err, errContractMismatch):
		s.logger.Error(op+" failed", append(attrs, "err", err)...)
		return status.Errorf(codes.Internal, "%s failed", op)
	default:
		s.logger.Warn(op+" failed", append(attrs, "err", err)...)
		return status.Errorf(codes.Unavailable, "%s: postgres unreachable; retry", op)
	}
}

// identErrors checks a lease name and a holder.
func identErrors(name, holder string) []error {
	var errs []error
	if err := nameError(name); err != nil {
		errs = append(errs, err)
	}
	switch {
	case holder == "":
		errs = append(errs, errors.New("holder is required: a unique ID of the calling instance (host, process, random part)"))
	case len(holder) > maxNameLen || !utf8.ValidString(holder) || strings.IndexFunc(holder, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0:
		errs = append(errs, fmt.Errorf("holder %q: want at most %d printable characters without spaces", holder, maxNameLen))
	}
	return errs
}

// nameError checks a lease name: letters, digits and . _ / - only, as in
// "processor" or "dispatcher/msg".
func nameError(name string) error {
	switch {
	case name == "":
		return errors.New("name is required, e.g. processor, ingest-scanner or dispatcher/msg")
	case len(name) > maxNameLen || strings.IndexFunc(name, func(r rune) bool {
		return !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._/-", r)))
	}) >= 0:
		return fmt.Errorf("name %q: want at most %d ASCII letters, digits and . _ / -, e.g. dispatcher/msg", name, maxNameLen)
	}
	return nil
}

// ttlErrors checks a requested time to live.
func ttlErrors(ttl time.Duration, missing bool) []error {
	switch {
	case missing:
		return []error{fmt.Errorf("ttl is required, between %v and %v", MinTTL, MaxTTL)}
	case ttl < MinTTL || ttl > MaxTTL:
		return []error{fmt.Errorf("ttl %v: want between %v and %v", ttl, MinTTL, MaxTTL)}
	}
	return nil
}
