package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	"msgexchange/services/control/internal/paging"
	"msgexchange/services/control/internal/rpcstatus"
)

// Server implements controlv1.ReplayServiceServer over the pipeline's
// PostgreSQL. Each call's database work runs under its own timeout.
type Server struct {
	controlv1.UnimplementedReplayServiceServer

	db           *pgxpool.Pool
	clock        clock.Clock
	logger       *slog.Logger
	queryTimeout time.Duration
}

// NewServer returns a Server over db. clk supplies the request time;
// queryTimeout bounds each call's database work.
func NewServer(db *pgxpool.Pool, clk clock.Clock, logger *slog.Logger, queryTimeout time.Duration) *Server {
	return &Server{db: db, clock: clk, logger: logger, queryTimeout: queryTimeout}
}

// Preview lists what a selector matches now; it changes nothing.
func (s *Server) Preview(ctx context.Context, req *controlv1.PreviewReplayRequest) (*controlv1.PreviewReplayResponse, error) {
	sel, err := selectorFrom(req.GetSelector())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	m, err := resolve(qctx, s.db, sel)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "previewing replay", err)
	}
	return &controlv1.PreviewReplayResponse{
		Messages:        m.candidates,
		Count:           int64(len(m.candidates)),
		ReplayableCount: int64(len(m.replayable())),
		MissingIds:      m.missing,
		Truncated:       m.truncated,
	}, nil
}

// errNothingReplayable ends an Execute that would record an empty request.
var errNothingReplayable = errors.New("none of the selected messages is replayable; see Preview for the reasons")

// Execute records a replay request for the processor to apply.
func (s *Server) Execute(ctx context.Context, req *controlv1.ExecuteReplayRequest) (*controlv1.ExecuteReplayResponse, error) {
	sel, err := selectorFrom(req.GetSelector())
	errs := audit.Validate(req.GetOperator(), req.GetReason(), auditPurpose)
	if err != nil {
		errs = append([]error{err}, errs...)
	}
	if len(errs) > 0 {
		return nil, status.Error(codes.InvalidArgument, errors.Join(errs...).Error())
	}
	selJSON, err := json.Marshal(sel.json())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding selector: %v", err)
	}
	who := caller.From(ctx) // recorded with the request (R-H9)
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	resp := &controlv1.ExecuteReplayResponse{}
	err = pgxutil.InTx(qctx, s.db, func(tx pgx.Tx) error {
		// Executes take turns, so a message is never in two pending
		// requests.
		if _, err := tx.Exec(qctx, `SELECT pg_advisory_xact_lock(hashtextextended('replay_request', 0))`); err != nil {
			return fmt.Errorf("locking replay requests: %w", err)
		}
		m, err := resolve(qctx, tx, sel)
		if err != nil {
			return err
		}
		resp.MissingIds, resp.Truncated = m.missing, m.truncated
		for _, c := range m.candidates {
			if !c.GetReplayable() {
				resp.NotReplayable = append(resp.NotReplayable, c)
			}
		}
		ids := m.replayable()
		if len(ids) == 0 {
			return errNothingReplayable
		}
		var id int64
		if err := tx.QueryRow(qctx, `
			INSERT INTO replay_request (msg_ids, selector, operator, reason, requested_at, principal, peer)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			ids, selJSON, req.GetOperator(), req.GetReason(), s.clock.Now(), who.Principal, who.Peer).Scan(&id); err != nil {
			return fmt.Errorf("recording replay request: %w", err)
		}
		resp.Request, err = queryRequest(qctx, tx, id)
		return err
	})
	if errors.Is(err, errNothingReplayable) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "recording replay", err)
	}
	s.logger.Info("replay requested", "request_id", resp.Request.GetId(), "msg_ids", resp.Request.GetMsgIds(),
		"left_out", len(resp.NotReplayable), "missing", len(resp.MissingIds),
		"operator", req.GetOperator(), "reason", req.GetReason(), "selector", string(selJSON))
	return resp, nil
}

// GetReplayRequest returns one request with its outcome and audit rows.
func (s *Server) GetReplayRequest(ctx context.Context, req *controlv1.GetReplayRequestRequest) (*controlv1.GetReplayRequestResponse, error) {
	if err := rpcstatus.PositiveID("id", req.GetId(), "replay request ID"); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	r, err := queryRequest(qctx, s.db, req.GetId())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, status.Errorf(codes.NotFound, "replay request %d not found", req.GetId())
	}
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading replay request", err, "request_id", req.GetId())
	}
	return &controlv1.GetReplayRequestResponse{Request: r}, nil
}

// Listing limits of ListReplayRequests.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListReplayRequests lists the recorded replay requests, newest first,
// without their audit entries (R-N9).
func (s *Server) ListReplayRequests(ctx context.Context, req *controlv1.ListReplayRequestsRequest) (*controlv1.ListReplayRequestsResponse, error) {
	limit, err := paging.Limit(req.GetLimit(), DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if err := paging.NotNegative("before_id", req.GetBeforeId()); err != nil {
		return nil, err
	}
	state := ""
	if st := req.GetState(); st != controlv1.ReplayRequestState_REPLAY_REQUEST_STATE_UNSPECIFIED {
		name, ok := strings.CutPrefix(st.String(), "REPLAY_REQUEST_STATE_")
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "state %d: unknown", st)
		}
		state = name
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	list, err := queryRequests(qctx, s.db, state, req.GetBeforeId(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing replay requests", err)
	}
	page, last, more := paging.Trim(list, limit)
	resp := &controlv1.ListReplayRequestsResponse{Requests: page}
	if more {
		resp.NextBeforeId = last.GetId()
	}
	return resp, nil
}
