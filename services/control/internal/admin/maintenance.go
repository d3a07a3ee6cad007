package admin

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"msgexchange/libs/clock"
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/audit"
	"msgexchange/services/control/internal/caller"
	"msgexchange/services/control/internal/nullable"
	"msgexchange/services/control/internal/paging"
	"msgexchange/services/control/internal/rpcstatus"
)

// Limits of ListMaintenanceRuns.
const (
	DefaultRunsLimit = 50
	MaxRunsLimit     = 1000
)

// maintenanceJobPrefix is the enum prefix of MaintenanceJob; the database
// names a job in lower case with dashes: MAINTENANCE_JOB_HISTORY_SWEEP ↔
// history-sweep.
const maintenanceJobPrefix = "MAINTENANCE_JOB_"

func jobToDB(j controlv1.MaintenanceJob) (string, bool) {
	n, ok := strings.CutPrefix(j.String(), maintenanceJobPrefix)
	if !ok || j == controlv1.MaintenanceJob_MAINTENANCE_JOB_UNSPECIFIED {
		return "", false
	}
	return strings.ReplaceAll(strings.ToLower(n), "_", "-"), true
}

func jobFromDB(v string) (controlv1.MaintenanceJob, error) {
	n, err := enumFromDB(maintenanceJobPrefix, "maintenance job", strings.ReplaceAll(strings.ToUpper(v), "-", "_"), controlv1.MaintenanceJob_value)
	return controlv1.MaintenanceJob(n), err
}

// MaintenanceServer implements controlv1.MaintenanceServiceServer (R-N9):
// the processor's maintenance runs, and requests to run a job or its dry
// run, which the processor's maintenance loop takes.
type MaintenanceServer struct {
	controlv1.UnimplementedMaintenanceServiceServer

	db           *pgxpool.Pool
	clock        clock.Clock
	logger       *slog.Logger
	queryTimeout time.Duration
}

// NewMaintenanceServer returns a MaintenanceServer on db.
func NewMaintenanceServer(db *pgxpool.Pool, clk clock.Clock, logger *slog.Logger, queryTimeout time.Duration) *MaintenanceServer {
	return &MaintenanceServer{db: db, clock: clk, logger: logger, queryTimeout: queryTimeout}
}

// ListMaintenanceRuns lists maintenance_run rows, newest first.
func (s *MaintenanceServer) ListMaintenanceRuns(ctx context.Context, req *controlv1.ListMaintenanceRunsRequest) (*controlv1.ListMaintenanceRunsResponse, error) {
	limit, err := paging.Limit(req.GetLimit(), DefaultRunsLimit, MaxRunsLimit)
	if err != nil {
		return nil, err
	}
	if err := paging.NotNegative("before_id", req.GetBeforeId()); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.db.Query(qctx, `
		SELECT id, job, COALESCE(request_id, 0), scheduled_for, started_at, finished_at, records_deleted, outbox_deleted,
			flights_archived, flights_skipped, flights_failed, tombstones, error
		FROM maintenance_run WHERE ($1 = 0 OR id < $1) ORDER BY id DESC LIMIT $2`, req.GetBeforeId(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing maintenance runs", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.MaintenanceRun, error) {
		var (
			m                  controlv1.MaintenanceRun
			job                string
			scheduled, started time.Time
			finished           *time.Time
			runErr             *string
		)
		if err := r.Scan(&m.Id, &job, &m.RequestId, &scheduled, &started, &finished, &m.RecordsDeleted, &m.OutboxDeleted,
			&m.FlightsArchived, &m.FlightsSkipped, &m.FlightsFailed, &m.Tombstones, &runErr); err != nil {
			return nil, err
		}
		var err error
		if m.Job, err = jobFromDB(job); err != nil {
			return nil, err
		}
		m.ScheduledFor, m.StartedAt, m.FinishedAt = timestamppb.New(scheduled), timestamppb.New(started), nullable.Timestamp(finished)
		m.Error = nullable.String(runErr)
		return &m, nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing maintenance runs", err)
	}
	page, last, more := paging.Trim(list, limit)
	resp := &controlv1.ListMaintenanceRunsResponse{Runs: page}
	if more {
		resp.NextBeforeId = last.GetId()
	}
	return resp, nil
}

// maintenanceRequestColumns are the columns scanMaintenanceRequest reads.
const maintenanceRequestColumns = `id, job, dry_run, state, operator, reason, requested_at, started_at, finished_at,
	COALESCE(run_id, 0), COALESCE(result::text, ''), error`

func scanMaintenanceRequest(r pgx.Row) (*controlv1.MaintenanceRequest, error) {
	var (
		m                 controlv1.MaintenanceRequest
		job, state        string
		requested         time.Time
		started, finished *time.Time
		reqErr            *string
	)
	if err := r.Scan(&m.Id, &job, &m.DryRun, &state, &m.Operator, &m.Reason, &requested, &started, &finished,
		&m.RunId, &m.ResultJson, &reqErr); err != nil {
		return nil, err
	}
	var err error
	if m.Job, err = jobFromDB(job); err != nil {
		return nil, err
	}
	n, err := enumFromDB("MAINTENANCE_REQUEST_STATE_", "maintenance request state", state, controlv1.MaintenanceRequestState_value)
	if err != nil {
		return nil, err
	}
	m.State = controlv1.MaintenanceRequestState(n)
	m.RequestedAt, m.StartedAt, m.FinishedAt = timestamppb.New(requested), nullable.Timestamp(started), nullable.Timestamp(finished)
	m.Error = nullable.String(reqErr)
	return &m, nil
}

// RequestMaintenance records an operator's request for one job or its
// dry run; the processor's maintenance loop runs it.
func (s *MaintenanceServer) RequestMaintenance(ctx context.Context, req *controlv1.RequestMaintenanceRequest) (*controlv1.RequestMaintenanceResponse, error) {
	job, ok := jobToDB(req.GetJob())
	errs := audit.Validate(req.GetOperator(), req.GetReason(), "who runs maintenance and why is recorded in the audit")
	if !ok {
		errs = append([]error{errors.New("job: one of daily, cleanup, history-sweep, history-purge, self-check")}, errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	c := caller.From(ctx)
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	m, err := scanMaintenanceRequest(s.db.QueryRow(qctx, `
		INSERT INTO maintenance_request (job, dry_run, operator, reason, principal, peer, requested_at)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7)
		RETURNING `+maintenanceRequestColumns,
		job, req.GetDryRun(), strings.TrimSpace(req.GetOperator()), strings.TrimSpace(req.GetReason()), c.Principal, c.Peer, s.clock.Now()))
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "recording maintenance request", err, "job", job)
	}
	s.logger.Info("maintenance requested", "request_id", m.GetId(), "job", job, "dry_run", req.GetDryRun(),
		"operator", m.GetOperator(), "reason", m.GetReason(), "principal", c.Principal, "peer", c.Peer)
	return &controlv1.RequestMaintenanceResponse{Request: m}, nil
}

// GetMaintenanceRequest returns one request with its state and result.
func (s *MaintenanceServer) GetMaintenanceRequest(ctx context.Context, req *controlv1.GetMaintenanceRequestRequest) (*controlv1.GetMaintenanceRequestResponse, error) {
	if err := rpcstatus.PositiveID("id", req.GetId(), "maintenance request ID"); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	m, err := scanMaintenanceRequest(s.db.QueryRow(qctx, `SELECT `+maintenanceRequestColumns+` FROM maintenance_request WHERE id = $1`, req.GetId()))
	if err := rpcstatus.RowError(s.logger, err, "maintenance request", "id", req.GetId(), ""); err != nil {
		return nil, err
	}
	return &controlv1.GetMaintenanceRequestResponse{Request: m}, nil
}
