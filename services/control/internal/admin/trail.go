package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/nullable"
	"msgexchange/services/control/internal/rpcstatus"
)

// Trail limits: a request without a limit gets DefaultTrailLimit entries,
// none gets more than MaxTrailLimit; at most maxArchived archived
// versions are listed.
const (
	DefaultTrailLimit = 50
	MaxTrailLimit     = 500
	maxArchived       = 100
)

// trailTarget is the outbox target whose rows are the flight's changes:
// the msg topic's events carry version, changed keys and source message.
const trailTarget = "msg"

// InspectServer implements controlv1.InspectServiceServer (R-N9): the
// operators' questions about a flight, answered from the pipeline's
// PostgreSQL without SQL on their side.
type InspectServer struct {
	controlv1.UnimplementedInspectServiceServer

	db           *pgxpool.Pool
	logger       *slog.Logger
	queryTimeout time.Duration
}

// NewInspectServer returns an InspectServer reading db; queryTimeout
// bounds each call's database work.
func NewInspectServer(db *pgxpool.Pool, logger *slog.Logger, queryTimeout time.Duration) *InspectServer {
	return &InspectServer{db: db, logger: logger, queryTimeout: queryTimeout}
}

// GetFlightTrail returns a flight's changes (newest first), its current row
// and its archived versions.
func (s *InspectServer) GetFlightTrail(ctx context.Context, req *controlv1.GetFlightTrailRequest) (*controlv1.GetFlightTrailResponse, error) {
	if err := rpcstatus.PositiveID("flid", req.GetFlid(), "FLID"); err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		return nil, status.Errorf(codes.InvalidArgument, "limit %d: must not be negative", limit)
	case limit == 0:
		limit = DefaultTrailLimit
	case limit > MaxTrailLimit:
		limit = MaxTrailLimit
	}
	if req.GetBeforeOutboxId() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "before_outbox_id %d: must not be negative", req.GetBeforeOutboxId())
	}
	flid := req.GetFlid()
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	resp := &controlv1.GetFlightTrailResponse{Flid: flid}
	current, err := queryFlight(qctx, s.db, flid)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, rpcstatus.QueryError(s.logger, "reading flight", err, "flid", flid)
	default:
		resp.Current = current
	}
	entries, err := queryTrail(qctx, s.db, s.logger, flid, req.GetBeforeOutboxId(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading flight trail", err, "flid", flid)
	}
	if len(entries) > limit {
		entries = entries[:limit]
		resp.NextBeforeOutboxId = entries[limit-1].GetOutboxId()
	}
	resp.Entries = entries
	if resp.Archived, err = queryArchived(qctx, s.db, flid); err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading archived flight versions", err, "flid", flid)
	}
	if resp.Current == nil && len(resp.Entries) == 0 && len(resp.Archived) == 0 && req.GetBeforeOutboxId() == 0 {
		return nil, status.Errorf(codes.NotFound, "flight %d not found: no row, no change in the outbox and no archived version", flid)
	}
	return resp, nil
}

// trailEvent is the part of a msg event (contract.Event) the trail shows.
type trailEvent struct {
	EventType    string    `json:"event_type"`
	StateVersion int64     `json:"state_version"`
	Changed      []string  `json:"changed"`
	Reason       string    `json:"reason"`
	OccurredAt   time.Time `json:"occurred_at"`
	Source       *struct {
		MsgID   int64  `json:"msg_id"`
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
		Sender  string `json:"sender"`
		Seqn    string `json:"seqn"`
	} `json:"source"`
}

// queryTrail returns up to limit msg rows of flid older than before (0:
// the newest), newest first, with the processing state of each row's
// message; a row whose event cannot be decoded is listed with the reason.
// The partial index outbox_msg_trail_idx serves it.
func queryTrail(ctx context.Context, db *pgxpool.Pool, logger *slog.Logger, flid, before int64, limit int) ([]*controlv1.FlightTrailEntry, error) {
	const q = `
SELECT o.id, o.payload, o.msg_id, o.state, o.sent_at, p.state
FROM outbox o LEFT JOIN proc_state p ON p.msg_id = o.msg_id
WHERE o.target = $1 AND o.pkey = $2 AND ($3 = 0 OR o.id < $3)
ORDER BY o.id DESC
LIMIT $4`
	rows, err := db.Query(ctx, q, trailTarget, strconv.FormatInt(flid, 10), before, limit)
	if err != nil {
		return nil, fmt.Errorf("querying the msg events of flight %d: %w", flid, err)
	}
	defer rows.Close()
	var out []*controlv1.FlightTrailEntry
	for rows.Next() {
		var (
			e        controlv1.FlightTrailEntry
			payload  []byte
			msgID    *int64
			delivery string
			sentAt   *time.Time
			msgState *string
		)
		if err := rows.Scan(&e.OutboxId, &payload, &msgID, &delivery, &sentAt, &msgState); err != nil {
			return nil, fmt.Errorf("reading a msg event of flight %d: %w", flid, err)
		}
		var ev trailEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			// Still list the row, with what the outbox itself says: one
			// unreadable event must not hide the rest of the trail.
			logger.Warn("flight trail: msg event not decodable", "outbox_id", e.OutboxId, "flid", flid, "err", err)
			ev = trailEvent{Reason: "event not decodable: " + err.Error()}
		}
		e.StateVersion, e.EventType, e.Changed, e.Reason = ev.StateVersion, ev.EventType, ev.Changed, ev.Reason
		if !ev.OccurredAt.IsZero() {
			e.OccurredAt = timestamppb.New(ev.OccurredAt)
		}
		if ev.Source != nil {
			e.MsgId, e.MsgType, e.MsgSubtype, e.Sender, e.Seqn = ev.Source.MsgID, ev.Source.Type, ev.Source.Subtype, ev.Source.Sender, ev.Source.Seqn
		}
		if msgID != nil && e.MsgId == 0 {
			e.MsgId = *msgID
		}
		if msgState != nil {
			if e.MessageState, err = messageStateFromDB(*msgState); err != nil {
				return nil, err
			}
		}
		if e.Delivery, err = outboxStateFromDB(delivery); err != nil {
			return nil, err
		}
		if sentAt != nil {
			e.DeliveredAt = timestamppb.New(*sentAt)
		}
		out = append(out, &e)
	}
	return out, rows.Err()
}

// queryArchived returns the newest maxArchived flight_history versions of
// flid, without documents.
func queryArchived(ctx context.Context, db *pgxpool.Pool, flid int64) ([]*controlv1.ArchivedFlightVersion, error) {
	const q = `
SELECT state_version, state, to_char(operation_day, 'YYYY-MM-DD'), last_msg_id, updated_at, archived_at
FROM flight_history
WHERE flid = $1
ORDER BY state_version DESC
LIMIT $2`
	rows, err := db.Query(ctx, q, flid, maxArchived)
	if err != nil {
		return nil, fmt.Errorf("querying flight_history of flight %d: %w", flid, err)
	}
	defer rows.Close()
	var out []*controlv1.ArchivedFlightVersion
	for rows.Next() {
		var (
			v                 controlv1.ArchivedFlightVersion
			state             string
			opDay             *string
			updated, archived time.Time
		)
		if err := rows.Scan(&v.StateVersion, &state, &opDay, &v.LastMsgId, &updated, &archived); err != nil {
			return nil, fmt.Errorf("reading flight_history of flight %d: %w", flid, err)
		}
		if v.State, err = flightStateFromDB(state); err != nil {
			return nil, err
		}
		v.OperationDay = nullable.String(opDay)
		v.UpdatedAt, v.ArchivedAt = timestamppb.New(updated), timestamppb.New(archived)
		out = append(out, &v)
	}
	return out, rows.Err()
}
