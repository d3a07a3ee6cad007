package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/paging"
	"msgexchange/services/control/internal/rpcstatus"
)

// Limits of GetArchivedFlight: versions carry their documents, so pages
// are smaller than other listings'.
const (
	DefaultArchivedLimit = 20
	MaxArchivedLimit     = 100
)

// GetArchivedFlight returns a flight's archived versions with their
// documents, newest first (R-N9).
func (s *InspectServer) GetArchivedFlight(ctx context.Context, req *controlv1.GetArchivedFlightRequest) (*controlv1.GetArchivedFlightResponse, error) {
	if err := rpcstatus.PositiveID("flid", req.GetFlid(), "FLID"); err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit(), DefaultArchivedLimit, MaxArchivedLimit)
	if err != nil {
		return nil, err
	}
	if err := paging.NotNegative("before_version", req.GetBeforeVersion()); err != nil {
		return nil, err
	}
	flid := req.GetFlid()
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.db.Query(qctx, `
		SELECT state_version, state, to_char(operation_day, 'YYYY-MM-DD'), last_msg_id, updated_at, archived_at,
			COALESCE(master_flid, 0), created_at, doc
		FROM flight_history
		WHERE flid = $1 AND ($2 = 0 OR state_version < $2)
		ORDER BY state_version DESC LIMIT $3`, flid, req.GetBeforeVersion(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading archived flight", err, "flid", flid)
	}
	versions, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.ArchivedFlight, error) {
		var (
			v                          controlv1.ArchivedFlightVersion
			a                          = controlv1.ArchivedFlight{Version: &v}
			state, opDay               string
			updated, archived, created time.Time
			doc                        []byte
		)
		if err := r.Scan(&v.StateVersion, &state, &opDay, &v.LastMsgId, &updated, &archived, &a.MasterFlid, &created, &doc); err != nil {
			return nil, err
		}
		var err error
		if v.State, err = flightStateFromDB(state); err != nil {
			return nil, err
		}
		v.OperationDay, v.UpdatedAt, v.ArchivedAt = opDay, timestamppb.New(updated), timestamppb.New(archived)
		a.CreatedAt, a.DocJson = timestamppb.New(created), string(doc)
		return &a, nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading archived flight", fmt.Errorf("flight_history of %d: %w", flid, err), "flid", flid)
	}
	page, last, more := paging.Trim(versions, limit)
	if len(page) == 0 && req.GetBeforeVersion() == 0 {
		return nil, status.Errorf(codes.NotFound, "flight %d has no archived version", flid)
	}
	resp := &controlv1.GetArchivedFlightResponse{Flid: flid, Versions: page}
	if more {
		resp.NextBeforeVersion = last.GetVersion().GetStateVersion()
	}
	if err := s.db.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM flight WHERE flid = $1)`, flid).Scan(&resp.Live); err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading flight", err, "flid", flid)
	}
	return resp, nil
}

// Limits of the reference data, season, snapshot log and reuse listings.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListReferenceData lists ref_data rows by type and key (R-N9).
func (s *InspectServer) ListReferenceData(ctx context.Context, req *controlv1.ListReferenceDataRequest) (*controlv1.ListReferenceDataResponse, error) {
	limit, err := paging.Limit(req.GetLimit(), DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if req.GetKey() != "" && req.GetType() == "" {
		return nil, status.Error(codes.InvalidArgument, "key needs type: a key is unique only within its reference type")
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.db.Query(qctx, `
		SELECT type, key, doc, last_msg_id, updated_at FROM ref_data
		WHERE ($1 = '' OR type = $1) AND ($2 = '' OR key = $2) AND starts_with(key, $3)
		  AND (type, key) > ($4, $5)
		ORDER BY type, key LIMIT $6`,
		req.GetType(), req.GetKey(), req.GetKeyPrefix(), req.GetAfterType(), req.GetAfterKey(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing reference data", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.ReferenceData, error) {
		var (
			d       controlv1.ReferenceData
			doc     []byte
			updated time.Time
		)
		if err := r.Scan(&d.Type, &d.Key, &doc, &d.LastMsgId, &updated); err != nil {
			return nil, err
		}
		d.DocJson, d.UpdatedAt = string(doc), timestamppb.New(updated)
		return &d, nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing reference data", err)
	}
	page, last, more := paging.Trim(items, limit)
	resp := &controlv1.ListReferenceDataResponse{Items: page, Types: map[string]int64{}}
	if more {
		resp.NextAfterType, resp.NextAfterKey = last.GetType(), last.GetKey()
	}
	rows, err = s.db.Query(qctx, `SELECT type, count(*) FROM ref_data GROUP BY type`)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "counting reference data", err)
	}
	var (
		typ string
		n   int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&typ, &n}, func() error { resp.Types[typ] = n; return nil }); err != nil {
		return nil, rpcstatus.QueryError(s.logger, "counting reference data", err)
	}
	return resp, nil
}

// seasonColumns are the season_schedule columns scanSeason reads.
const seasonColumns = `id, snam, apcd, sdat, edat, to_char(start_date, 'YYYY-MM-DD'), to_char(end_date, 'YYYY-MM-DD'),
	flights, last_msg_id, updated_at`

func scanSeason(r pgx.Row) (*controlv1.SeasonSchedule, error) {
	var (
		sc      controlv1.SeasonSchedule
		updated time.Time
	)
	if err := r.Scan(&sc.Id, &sc.Snam, &sc.Apcd, &sc.Sdat, &sc.Edat, &sc.StartDate, &sc.EndDate, &sc.Flights, &sc.LastMsgId, &updated); err != nil {
		return nil, err
	}
	sc.UpdatedAt = timestamppb.New(updated)
	return &sc, nil
}

// ListSeasonSchedules lists the season windows, newest first (R-N9).
func (s *InspectServer) ListSeasonSchedules(ctx context.Context, req *controlv1.ListSeasonSchedulesRequest) (*controlv1.ListSeasonSchedulesResponse, error) {
	limit, err := paging.Limit(req.GetLimit(), DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if err := paging.NotNegative("before_id", req.GetBeforeId()); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.db.Query(qctx, `SELECT `+seasonColumns+` FROM season_schedule
		WHERE ($1 = '' OR snam = $1) AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`, req.GetSnam(), req.GetBeforeId(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing season schedules", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.SeasonSchedule, error) { return scanSeason(r) })
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing season schedules", err)
	}
	page, last, more := paging.Trim(list, limit)
	resp := &controlv1.ListSeasonSchedulesResponse{Schedules: page}
	if more {
		resp.NextBeforeId = last.GetId()
	}
	return resp, nil
}

// GetSeasonSchedule returns a season window with a page of its flights
// (R-N9).
func (s *InspectServer) GetSeasonSchedule(ctx context.Context, req *controlv1.GetSeasonScheduleRequest) (*controlv1.GetSeasonScheduleResponse, error) {
	if err := rpcstatus.PositiveID("id", req.GetId(), "season schedule ID"); err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit(), DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if err := paging.NotNegative("after_seq", int64(req.GetAfterSeq())); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	sc, err := scanSeason(s.db.QueryRow(qctx, `SELECT `+seasonColumns+` FROM season_schedule WHERE id = $1`, req.GetId()))
	if err := rpcstatus.RowError(s.logger, err, "season schedule", "id", req.GetId(), ""); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(qctx, `SELECT seq, alcd, flno, mvin, doc FROM season_flight
		WHERE season_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, req.GetId(), req.GetAfterSeq(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading season flights", err, "id", req.GetId())
	}
	flights, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.SeasonFlight, error) {
		var (
			f   controlv1.SeasonFlight
			doc []byte
		)
		if err := r.Scan(&f.Seq, &f.Alcd, &f.Flno, &f.Mvin, &doc); err != nil {
			return nil, err
		}
		f.DocJson = string(doc)
		return &f, nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading season flights", err, "id", req.GetId())
	}
	page, last, more := paging.Trim(flights, limit)
	resp := &controlv1.GetSeasonScheduleResponse{Schedule: sc, Flights: page}
	if more {
		resp.NextAfterSeq = last.GetSeq()
	}
	return resp, nil
}
