package requests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"msgexchange/libs/clock"
	"msgexchange/libs/pgxutil"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/audit"
	"msgexchange/services/control/internal/caller"
	"msgexchange/services/control/internal/rpcstatus"
	"msgexchange/services/internal/outbox"
	"msgexchange/services/internal/sisrequest"
)

// Listing limits: a request without a limit gets DefaultListLimit rows, and
// no request gets more than MaxListLimit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// TargetCoutmsgs is the outbox target the dispatcher relays into COUTMSGS.
const TargetCoutmsgs = outbox.Coutmsgs

// auditPurpose says, in the message of a missing operator or reason, what
// is recorded.
const auditPurpose = "who asks and why is recorded with every request"

// Server implements controlv1.RequestServiceServer over the pipeline's
// PostgreSQL.
type Server struct {
	controlv1.UnimplementedRequestServiceServer

	db           *pgxpool.Pool
	clock        clock.Clock
	logger       *slog.Logger
	queryTimeout time.Duration
	zone         *time.Location
	ignored      []string
}

// NewServer returns a Server writing to db. clk supplies the registration
// time, written as META/DTTM in zone (the airport's); queryTimeout bounds
// each call's database work. ignored are the TYPEs on the processor's
// ignore list (processor.pipeline.ignore-types, upper case): an RQRD for
// one of them is refused (R-C12).
func NewServer(db *pgxpool.Pool, clk clock.Clock, logger *slog.Logger, queryTimeout time.Duration, zone *time.Location, ignored []string) *Server {
	return &Server{db: db, clock: clk, logger: logger, queryTimeout: queryTimeout, zone: zone, ignored: slices.Clone(ignored)}
}

// scope is what makes two requests "the same": type, sender and the window
// (RQFD) or the reference type (RQRD).
type scope struct {
	typ, sender      string
	stdb, stde, rtyp string
}

// SendRQFD registers a daily schedule request for a window.
func (s *Server) SendRQFD(ctx context.Context, req *controlv1.SendRQFDRequest) (*controlv1.SendRequestResponse, error) {
	var errs []error
	if err := sisrequest.ValidateWindow(req.GetStdb(), req.GetStde()); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, audit.Validate(req.GetOperator(), req.GetReason(), auditPurpose)...)
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	sc := scope{typ: sisrequest.TypeRQFD, sender: sisrequest.Sender, stdb: req.GetStdb(), stde: req.GetStde()}
	return s.send(ctx, sc, req.GetOperator(), req.GetReason())
}

// SendRQRD registers a reference data request for one type.
func (s *Server) SendRQRD(ctx context.Context, req *controlv1.SendRQRDRequest) (*controlv1.SendRequestResponse, error) {
	var errs []error
	rtyp, err := sisrequest.NormalizeRTYP(req.GetRtyp())
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, audit.Validate(req.GetOperator(), req.GetReason(), auditPurpose)...)
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	if slices.Contains(s.ignored, rtyp) {
		// Never requested (R-C12): the processor would skip the answer.
		s.logger.Warn("RQRD refused: the type is on the ignore list", "rtyp", rtyp, "ignore_list", s.ignored, "operator", req.GetOperator())
		return nil, status.Error(codes.FailedPrecondition, fmt.Sprintf(
			"RQRD for %s refused: %s is on the ignore list (processor.pipeline.ignore-types = %s), so the processor would skip its RESP unread; remove %s from that list on the processor and the control plane to request it",
			rtyp, rtyp, strings.Join(s.ignored, ","), rtyp))
	}
	sc := scope{typ: sisrequest.TypeRQRD, sender: sisrequest.Sender, rtyp: rtyp}
	return s.send(ctx, sc, req.GetOperator(), req.GetReason())
}

// send registers the request of sc in one transaction: expire the open
// request of the same scope, insert the new one REGISTERED, insert its
// outbox row.
func (s *Server) send(ctx context.Context, sc scope, operator, reason string) (*controlv1.SendRequestResponse, error) {
	who := caller.From(ctx) // recorded with the request (R-H9)
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	now := s.clock.Now()
	var (
		row        *controlv1.OutboundRequest
		superseded int64
	)
	err := pgxutil.InTx(qctx, s.db, func(tx pgx.Tx) error {
		// Concurrent sends of one scope wait for each other, so the second
		// one sees and expires the first instead of hitting the unique index.
		lockKey := strings.Join([]string{"req_track", sc.typ, sc.sender, sc.rtyp, sc.stdb, sc.stde}, "|")
		if _, err := tx.Exec(qctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lockKey); err != nil {
			return fmt.Errorf("locking request scope: %w", err)
		}
		var id, seqn int64
		if err := tx.QueryRow(qctx, `SELECT nextval(pg_get_serial_sequence('req_track', 'id')), nextval('req_track_seqn')`).Scan(&id, &seqn); err != nil {
			return fmt.Errorf("drawing request id and SEQN: %w", err)
		}
		err := tx.QueryRow(qctx, `
			UPDATE req_track SET state='EXPIRED', closed_at=$6, closed_reason=$7
			WHERE type=$1 AND sender=$2 AND COALESCE(rtyp, '')=$3 AND COALESCE(stdb, '')=$4 AND COALESCE(stde, '')=$5
			  AND state IN ('REGISTERED', 'SENT', 'WAITING')
			RETURNING id`,
			sc.typ, sc.sender, sc.rtyp, sc.stdb, sc.stde, now, "superseded by request "+strconv.FormatInt(id, 10)).Scan(&superseded)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("expiring the open request of the scope: %w", err)
		}
		env := sisrequest.Envelope{Sender: sc.sender, Seqn: seqn, Created: now.In(s.zone)}
		var xml []byte
		if sc.typ == sisrequest.TypeRQFD {
			xml, err = sisrequest.EncodeRQFD(env, sc.stdb, sc.stde)
		} else {
			xml, err = sisrequest.EncodeRQRD(env, sc.rtyp)
		}
		if err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
		seqnText, _ := sisrequest.FormatSeqn(seqn) // in range: the sequence cycles 1…999999
		if _, err := tx.Exec(qctx, `
			INSERT INTO req_track (id, type, stdb, stde, rtyp, sender, seqn, state, xml, operator, reason, registered_at, principal, peer)
			VALUES ($1, $2, NULLIF($3, ''), NULLIF($4, ''), NULLIF($5, ''), $6, $7, 'REGISTERED', $8, $9, $10, $11, $12, $13)`,
			id, sc.typ, sc.stdb, sc.stde, sc.rtyp, sc.sender, seqnText, string(xml), operator, reason, now, who.Principal, who.Peer); err != nil {
			return fmt.Errorf("registering request: %w", err)
		}
		if _, err := tx.Exec(qctx, `
			INSERT INTO outbox (target, pkey, payload, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $4)`,
			TargetCoutmsgs, strconv.FormatInt(id, 10), xml, now); err != nil {
			return fmt.Errorf("queueing request for the mailbox: %w", err)
		}
		row, err = queryOne(qctx, tx, id)
		return err
	})
	if err != nil {
		if errors.Is(err, sisrequest.ErrInvalid) {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return nil, rpcstatus.QueryError(s.logger, "registering request", err, "type", sc.typ)
	}
	s.logger.Info("request registered", "request_id", row.GetId(), "type", sc.typ, "stdb", sc.stdb, "stde", sc.stde,
		"rtyp", sc.rtyp, "seqn", row.GetSeqn(), "operator", operator, "reason", reason, "superseded_id", superseded)
	return &controlv1.SendRequestResponse{Request: row, SupersededId: superseded}, nil
}

// ListRequests lists requests newest first.
func (s *Server) ListRequests(ctx context.Context, req *controlv1.ListRequestsRequest) (*controlv1.ListRequestsResponse, error) {
	var errs []error
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		errs = append(errs, fmt.Errorf("limit %d: must not be negative (0 means %d)", limit, DefaultListLimit))
	case limit == 0:
		limit = DefaultListLimit
	case limit > MaxListLimit:
		limit = MaxListLimit
	}
	state, err := stateToDB(req.GetState())
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	out, err := queryList(qctx, s.db, state, limit)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing requests", err)
	}
	return &controlv1.ListRequestsResponse{Requests: out}, nil
}
