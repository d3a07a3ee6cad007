package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/caller"
	"msgexchange/services/control/internal/rpcstatus"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/flightstate"
	"msgexchange/services/internal/outbox"
)

// Outbox targets a rebuild writes; the dispatcher relays flight-state to
// msgx.flight-state and projection-control to msgx.projection-control.
const (
	TargetFlightState       = outbox.FlightState
	TargetProjectionControl = outbox.ProjectionControl
)

// rebuildPage is how many flights one round trip of a rebuild reads and
// enqueues.
const rebuildPage = 500

// rebuildLockKey names the transaction-level advisory lock that keeps two
// rebuilds from being enqueued at the same moment.
const rebuildLockKey = "projection_rebuild"

// rebuildResult is what one rebuild enqueued.
type rebuildResult struct {
	generation       int64
	active, deleted  int64
	maxMsgID         int64
	firstID, lastID  *int64
	manifestOutboxID int64
	requestedAt      time.Time
}

// rebuildFrom validates a RebuildProjection request.
func rebuildFrom(req *controlv1.RebuildProjectionRequest) (operator, reason string, err error) {
	var errs []error
	operator, reason = strings.TrimSpace(req.GetOperator()), strings.TrimSpace(req.GetReason())
	switch {
	case operator == "":
		errs = append(errs, errors.New("operator: required, name who asks for the rebuild (it is recorded)"))
	case utf8.RuneCountInString(operator) > MaxOperatorLen:
		errs = append(errs, fmt.Errorf("operator: at most %d characters", MaxOperatorLen))
	}
	switch {
	case reason == "":
		errs = append(errs, errors.New("reason: required, say why the projection is rebuilt (it is recorded)"))
	case utf8.RuneCountInString(reason) > MaxReasonLen:
		errs = append(errs, fmt.Errorf("reason: at most %d characters", MaxReasonLen))
	}
	return operator, reason, errors.Join(errs...)
}

// RebuildProjection enqueues a rebuild of the whole Redis projection from
// PostgreSQL (R-E4, INV-11b): in one REPEATABLE READ transaction it reads
// every flight, inserts one flight-state outbox row per flight with its
// current state (exactly the processor's record, plus the msgx-rebuild
// header), then the manifest row for the projector, and the
// projection_rebuild row. Redis itself is written only by the projector
// (INV-24).
func (s *Server) RebuildProjection(ctx context.Context, req *controlv1.RebuildProjectionRequest) (*controlv1.RebuildProjectionResponse, error) {
	operator, reason, err := rebuildFrom(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	now := s.clock.Now()
	var res rebuildResult
	err = pgx.BeginTxFunc(ctx, s.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		res, err = s.rebuild(ctx, tx, operator, reason, now)
		return err
	})
	if errors.Is(err, errRebuildBusy) {
		return nil, status.Error(codes.Aborted, err.Error())
	}
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "enqueueing projection rebuild", err, "operator", operator)
	}
	s.logger.Info("projection rebuild enqueued", "generation", res.generation, "operator", operator, "reason", reason,
		"active", res.active, "deleted", res.deleted, "max_msg_id", res.maxMsgID, "manifest_outbox_id", res.manifestOutboxID)
	return &controlv1.RebuildProjectionResponse{Rebuild: &controlv1.ProjectionRebuild{
		Generation:       res.generation,
		Operator:         operator,
		Reason:           reason,
		RequestedAt:      timestamppb.New(res.requestedAt),
		Flights:          res.active + res.deleted,
		Active:           res.active,
		Deleted:          res.deleted,
		MaxMsgId:         res.maxMsgID,
		ManifestOutboxId: res.manifestOutboxID,
	}}, nil
}

// rebuild does the work of RebuildProjection inside tx. Every round trip
// has its own timeout.
func (s *Server) rebuild(ctx context.Context, tx pgx.Tx, operator, reason string, now time.Time) (rebuildResult, error) {
	res := rebuildResult{requestedAt: now}
	q := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, s.queryTimeout) }

	qctx, cancel := q()
	var locked bool
	err := tx.QueryRow(qctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))`, rebuildLockKey).Scan(&locked)
	cancel()
	if err != nil {
		return res, fmt.Errorf("locking projection rebuilds: %w", err)
	}
	if !locked {
		return res, errRebuildBusy
	}
	qctx, cancel = q()
	err = tx.QueryRow(qctx, `SELECT nextval(pg_get_serial_sequence('projection_rebuild', 'id'))`).Scan(&res.generation)
	cancel()
	if err != nil {
		return res, fmt.Errorf("allocating rebuild generation: %w", err)
	}
	gen := strconv.FormatInt(res.generation, 10)
	m := flightstate.Manifest{
		Generation: res.generation, Operator: operator, Reason: reason,
		Versions: map[int64]int64{}, Deleted: map[int64]int64{}, CreatedAt: now,
	}
	for after := int64(math.MinInt64); ; {
		page, err := s.rebuildPage(ctx, tx, after)
		if err != nil {
			return res, err
		}
		if len(page) == 0 {
			break
		}
		keys := make([]string, len(page))
		payloads := make([][]byte, len(page))
		headers := make([]string, len(page))
		for i, f := range page {
			rec, err := flightstate.Encode(f.flid, f.version, f.state, f.opDay, f.lastMsgID, f.doc)
			if err != nil {
				return res, err
			}
			rec.Headers[flightstate.HeaderRebuild] = gen
			h, err := json.Marshal(rec.Headers)
			if err != nil {
				return res, fmt.Errorf("encoding headers of flight %d: %w", f.flid, err)
			}
			keys[i], payloads[i], headers[i] = strconv.FormatInt(f.flid, 10), rec.Value, string(h)
			if f.state == flightstate.StateActive {
				m.Versions[f.flid] = f.version
				res.active++
			} else {
				m.Deleted[f.flid] = f.version
				res.deleted++
			}
			m.MaxMsgID = max(m.MaxMsgID, f.lastMsgID)
		}
		first, last, err := s.insertRebuildRows(ctx, tx, keys, payloads, headers, now)
		if err != nil {
			return res, err
		}
		if res.firstID == nil {
			res.firstID = &first
		}
		res.lastID = &last
		after = page[len(page)-1].flid
	}
	res.maxMsgID = m.MaxMsgID

	qctx, cancel = q()
	rows, err := tx.Query(qctx, `
		SELECT msg_id FROM proc_state WHERE state IN ('PENDING', 'FAILED') AND msg_id <= $1
		UNION
		SELECT m FROM replay_request r, unnest(r.msg_ids) AS m WHERE r.state = 'PENDING' AND m <= $1
		ORDER BY 1`, m.MaxMsgID)
	if err == nil {
		m.OpenMsgIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	cancel()
	if err != nil {
		return res, fmt.Errorf("reading open messages: %w", err)
	}

	manifest, err := m.Encode()
	if err != nil {
		return res, err
	}
	qctx, cancel = q()
	err = tx.QueryRow(qctx, `INSERT INTO outbox (target, pkey, payload, headers, next_attempt_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $5) RETURNING id`,
		TargetProjectionControl, gen, manifest, map[string]string{flightstate.HeaderRebuild: gen}, now).Scan(&res.manifestOutboxID)
	cancel()
	if err != nil {
		return res, fmt.Errorf("enqueueing rebuild manifest: %w", err)
	}
	qctx, cancel = q()
	c := caller.From(ctx)
	_, err = tx.Exec(qctx, `INSERT INTO projection_rebuild
		(id, operator, reason, flights, active, deleted, max_msg_id, first_outbox_id, last_outbox_id, manifest_outbox_id, requested_at, principal, peer)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		res.generation, operator, reason, res.active+res.deleted, res.active, res.deleted, res.maxMsgID,
		res.firstID, res.lastID, res.manifestOutboxID, now, c.Principal, c.Peer)
	cancel()
	if err != nil {
		return res, fmt.Errorf("recording projection rebuild: %w", err)
	}
	return res, nil
}

// rebuildFlight is one flight row as a rebuild reads it.
type rebuildFlight struct {
	flid, version, lastMsgID int64
	state                    string
	opDay                    *time.Time
	doc                      flight.Doc
}

// rebuildPage reads the next rebuildPage flights after FLID after.
func (s *Server) rebuildPage(ctx context.Context, tx pgx.Tx, after int64) ([]rebuildFlight, error) {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := tx.Query(qctx, `SELECT flid, state, state_version, operation_day, last_msg_id, doc
		FROM flight WHERE flid > $1 ORDER BY flid LIMIT $2`, after, rebuildPage)
	if err != nil {
		return nil, fmt.Errorf("reading flights: %w", err)
	}
	page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rebuildFlight, error) {
		var (
			f   rebuildFlight
			doc []byte
		)
		if err := row.Scan(&f.flid, &f.state, &f.version, &f.opDay, &f.lastMsgID, &doc); err != nil {
			return f, err
		}
		if f.state == flightstate.StateActive {
			if err := json.Unmarshal(doc, &f.doc); err != nil {
				return f, fmt.Errorf("reading document of flight %d: %w", f.flid, err)
			}
		}
		return f, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading flights: %w", err)
	}
	return page, nil
}

// insertRebuildRows enqueues one page of flight-state records (msg_id NULL:
// no message caused them) in FLID order and returns the first and last
// outbox ID.
func (s *Server) insertRebuildRows(ctx context.Context, tx pgx.Tx, keys []string, payloads [][]byte, headers []string, now time.Time) (int64, int64, error) {
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	var first, last int64
	err := tx.QueryRow(qctx, `
		WITH ins AS (
			INSERT INTO outbox (target, pkey, payload, headers, next_attempt_at, created_at)
			SELECT $1, u.k, u.p, u.h::jsonb, $5, $5
			FROM unnest($2::text[], $3::bytea[], $4::text[]) WITH ORDINALITY AS u(k, p, h, n)
			ORDER BY u.n
			RETURNING id)
		SELECT min(id), max(id) FROM ins`,
		TargetFlightState, keys, payloads, headers, now).Scan(&first, &last)
	if err != nil {
		return 0, 0, fmt.Errorf("enqueueing %d flight-state records: %w", len(keys), err)
	}
	return first, last, nil
}

// GetRebuild returns one projection rebuild with the delivery state of its
// outbox rows.
func (s *Server) GetRebuild(ctx context.Context, req *controlv1.GetRebuildRequest) (*controlv1.GetRebuildResponse, error) {
	if err := rpcstatus.PositiveID("generation", req.GetGeneration(), "rebuild generation"); err != nil {
		return nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	r, err := queryRebuild(qctx, s.db, req.GetGeneration())
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, status.Errorf(codes.NotFound, "projection rebuild %d not found", req.GetGeneration())
	}
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "reading projection rebuild", err, "generation", req.GetGeneration())
	}
	return &controlv1.GetRebuildResponse{Rebuild: r}, nil
}

// queryRebuild reads a projection_rebuild row and counts its outbox rows
// by state; pgx.ErrNoRows when absent.
func queryRebuild(ctx context.Context, db pgxQueryRower, generation int64) (*controlv1.ProjectionRebuild, error) {
	var (
		r               controlv1.ProjectionRebuild
		requested       time.Time
		firstID, lastID *int64
	)
	err := db.QueryRow(ctx, `SELECT id, operator, reason, flights, active, deleted, max_msg_id,
		first_outbox_id, last_outbox_id, manifest_outbox_id, requested_at
		FROM projection_rebuild WHERE id = $1`, generation).
		Scan(&r.Generation, &r.Operator, &r.Reason, &r.Flights, &r.Active, &r.Deleted, &r.MaxMsgId,
			&firstID, &lastID, &r.ManifestOutboxId, &requested)
	if err != nil {
		return nil, err
	}
	r.RequestedAt = timestamppb.New(requested)
	d := &controlv1.RebuildDelivery{}
	if firstID != nil && lastID != nil {
		rows, err := db.Query(ctx, `SELECT state, count(*) FROM outbox
			WHERE id BETWEEN $1 AND $2 AND target = $3 AND headers->>$4 = $5
			GROUP BY state`, *firstID, *lastID, TargetFlightState, flightstate.HeaderRebuild, strconv.FormatInt(generation, 10))
		if err != nil {
			return nil, fmt.Errorf("counting rebuild records: %w", err)
		}
		type count struct {
			State string
			N     int64
		}
		counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[count])
		if err != nil {
			return nil, fmt.Errorf("counting rebuild records: %w", err)
		}
		var seen int64
		for _, c := range counts {
			seen += c.N
			switch c.State {
			case "PENDING":
				d.Pending = c.N
			case "SENT":
				d.Sent = c.N
			case "DEAD":
				d.Dead = c.N
			default:
				return nil, fmt.Errorf("counting rebuild records: state %q: %w", c.State, errContractMismatch)
			}
		}
		d.CleanedUp = max(r.Flights-seen, 0)
	}
	var manifestState string
	err = db.QueryRow(ctx, `SELECT state FROM outbox WHERE id = $1`, r.ManifestOutboxId).Scan(&manifestState)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("reading rebuild manifest row: %w", err)
	default:
		if d.ManifestState, err = outboxStateFromDB(manifestState); err != nil {
			return nil, err
		}
	}
	r.Delivery = d
	return &r, nil
}

// pgxQueryRower is the part of a pool or transaction queryRebuild uses.
type pgxQueryRower interface {
	pgxQuerier
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
