package admin

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/audit"
	"msgexchange/services/control/internal/caller"
	"msgexchange/services/control/internal/nullable"
	"msgexchange/services/control/internal/rpcstatus"
)

// mailboxCensusColumns are the columns scanMailboxCensus reads.
const mailboxCensusColumns = `id, COALESCE(start_id, 0), state, operator, requested_at, started_at, finished_at,
	next_id, rows_from_start, after_last_marked, unmarked_from_start, unmarked_below_start, error`

func scanMailboxCensus(r pgx.Row) (*controlv1.MailboxCensus, error) {
	var (
		m                 controlv1.MailboxCensus
		state             string
		requested         time.Time
		started, finished *time.Time
		censusErr         *string
	)
	if err := r.Scan(&m.Id, &m.StartId, &state, &m.Operator, &requested, &started, &finished,
		&m.NextId, &m.RowsFromStart, &m.AfterLastMarked, &m.UnmarkedFromStart, &m.UnmarkedBelowStart, &censusErr); err != nil {
		return nil, err
	}
	n, err := enumFromDB("MAILBOX_CENSUS_STATE_", "mailbox census state", state, controlv1.MailboxCensusState_value)
	if err != nil {
		return nil, err
	}
	m.State = controlv1.MailboxCensusState(n)
	m.RequestedAt, m.StartedAt, m.FinishedAt = timestamppb.New(requested), nullable.Timestamp(started), nullable.Timestamp(finished)
	m.Error = nullable.String(censusErr)
	return &m, nil
}

// RequestMailboxCensus records an operator's request for the mailbox's
// cutover figures (R-L6, R-N9); a dispatcher counts them, since only the
// dispatcher holds a mailbox account allowed to read the two columns the
// counts need.
func (s *MaintenanceServer) RequestMailboxCensus(ctx context.Context, req *controlv1.RequestMailboxCensusRequest) (*controlv1.RequestMailboxCensusResponse, error) {
	// The reason is not asked for: the census writes nothing; the operator
	// is, since each census costs the mailbox a scan.
	errs := audit.Validate(req.GetOperator(), "census", "who asks the mailbox for a census is recorded")
	if req.GetStartId() < 0 {
		errs = append([]error{errors.New("start_id: must not be negative (0: no start)")}, errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	c := caller.From(ctx)
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	m, err := scanMailboxCensus(s.db.QueryRow(qctx, `
		INSERT INTO mailbox_census (start_id, operator, principal, peer, requested_at)
		VALUES (NULLIF($1, 0), $2, NULLIF($3, ''), NULLIF($4, ''), $5)
		RETURNING `+mailboxCensusColumns,
		req.GetStartId(), strings.TrimSpace(req.GetOperator()), c.Principal, c.Peer, s.clock.Now()))
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "recording mailbox census", err, "start_id", req.GetStartId())
	}
	s.logger.Info("mailbox census requested", "census_id", m.GetId(), "start_id", req.GetStartId(),
		"operator", m.GetOperator(), "principal", c.Principal, "peer", c.Peer)
	return &controlv1.RequestMailboxCensusResponse{Census: m}, nil
}

// GetMailboxCensus returns one census with its state and figures.
func (s *MaintenanceServer) GetMailboxCensus(ctx context.Context, req *controlv1.GetMailboxCensusRequest) (*controlv1.GetMailboxCensusResponse, error) {
	if err := rpcstatus.PositiveID("id", req.GetId(), "mailbox census ID"); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	m, err := scanMailboxCensus(s.db.QueryRow(qctx, `SELECT `+mailboxCensusColumns+` FROM mailbox_census WHERE id = $1`, req.GetId()))
	if err := rpcstatus.RowError(s.logger, err, "mailbox census", "id", req.GetId(), ""); err != nil {
		return nil, err
	}
	return &controlv1.GetMailboxCensusResponse{Census: m}, nil
}
