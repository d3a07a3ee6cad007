package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"msgexchange/libs/clock"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/rpcstatus"
)

// Outbox listing limits: a request without a limit gets DefaultOutboxLimit
// rows, and no request gets more than MaxOutboxLimit.
const (
	DefaultOutboxLimit = 100
	MaxOutboxLimit     = 1000
)

// Server implements controlv1.AdminServiceServer over the pipeline's
// PostgreSQL. Every query runs under its own timeout.
type Server struct {
	controlv1.UnimplementedAdminServiceServer

	db           *pgxpool.Pool
	clock        clock.Clock
	logger       *slog.Logger
	queryTimeout time.Duration
}

// NewServer returns a Server reading db. clk supplies "now" for backlog
// ages; queryTimeout bounds each database round trip.
func NewServer(db *pgxpool.Pool, clk clock.Clock, logger *slog.Logger, queryTimeout time.Duration) *Server {
	return &Server{db: db, clock: clk, logger: logger, queryTimeout: queryTimeout}
}

// GetMessage returns the proc_state row of one mailbox message.
func (s *Server) GetMessage(ctx context.Context, req *controlv1.GetMessageRequest) (*controlv1.GetMessageResponse, error) {
	if err := rpcstatus.PositiveID("msg_id", req.GetMsgId(), "mailbox ID"); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	m, err := queryMessage(qctx, s.db, req.GetMsgId(), req.GetIncludeRaw())
	if err := rpcstatus.RowError(s.logger, err, "message", "msg_id", req.GetMsgId(), "never registered by the processor, or already cleaned up"); err != nil {
		return nil, err
	}
	return &controlv1.GetMessageResponse{Message: m}, nil
}

// GetBacklog returns the processing backlog as of the injected clock's now.
func (s *Server) GetBacklog(ctx context.Context, _ *controlv1.GetBacklogRequest) (*controlv1.GetBacklogResponse, error) {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	b, err := queryBacklog(qctx, s.db)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading backlog", err)
	}
	now := s.clock.Now()
	resp := &controlv1.GetBacklogResponse{
		AsOf:             timestamppb.New(now),
		Counts:           b.counts,
		Unfinished:       b.counts.GetPending() + b.counts.GetFailed() + b.counts.GetApplied(),
		UnmarkedTerminal: b.unmarkedTerminal,
	}
	if b.oldestID != 0 {
		resp.OldestUnfinishedMsgId = b.oldestID
		resp.OldestUnfinishedSince = timestamppb.New(b.oldestSince)
		resp.OldestUnfinishedAgeSeconds = max(now.Sub(b.oldestSince).Seconds(), 0)
	}
	return resp, nil
}

// GetFlight returns the flight row of one FLID.
func (s *Server) GetFlight(ctx context.Context, req *controlv1.GetFlightRequest) (*controlv1.GetFlightResponse, error) {
	if err := rpcstatus.PositiveID("flid", req.GetFlid(), "FLID"); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	f, err := queryFlight(qctx, s.db, req.GetFlid())
	if err := rpcstatus.RowError(s.logger, err, "flight", "flid", req.GetFlid(), ""); err != nil {
		return nil, err
	}
	return &controlv1.GetFlightResponse{Flight: f}, nil
}

// ListOutbox returns one page of outbox rows in ascending ID order.
func (s *Server) ListOutbox(ctx context.Context, req *controlv1.ListOutboxRequest) (*controlv1.ListOutboxResponse, error) {
	f, err := outboxFilterFrom(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	entries, err := queryOutbox(qctx, s.db, f)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing outbox", err)
	}
	resp := &controlv1.ListOutboxResponse{Entries: entries}
	if len(entries) > f.limit {
		resp.Entries = entries[:f.limit]
		resp.NextAfterId = resp.Entries[f.limit-1].GetId()
	}
	return resp, nil
}

// outboxFilterFrom validates a ListOutbox request and applies the limit
// defaults.
func outboxFilterFrom(req *controlv1.ListOutboxRequest) (outboxFilter, error) {
	var errs []error
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		errs = append(errs, fmt.Errorf("limit %d: must not be negative (0 means %d)", limit, DefaultOutboxLimit))
	case limit == 0:
		limit = DefaultOutboxLimit
	case limit > MaxOutboxLimit:
		limit = MaxOutboxLimit
	}
	if req.GetAfterId() < 0 {
		errs = append(errs, fmt.Errorf("after_id %d: must not be negative", req.GetAfterId()))
	}
	state, err := outboxStateToDB(req.GetState())
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return outboxFilter{}, errors.Join(errs...)
	}
	return outboxFilter{target: req.GetTarget(), state: state, afterID: req.GetAfterId(), limit: limit}, nil
}
