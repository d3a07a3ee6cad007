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
	"msgexchange/services/control/internal/rpcstatus"
	"msgexchange/services/internal/outbox"
	"msgexchange/services/internal/stranded"
)

// Defaults and bounds of CheckConsistency.
const (
	defaultConsistencyGrace   = 60 * time.Second
	defaultConsistencySamples = 10
	maxConsistencySamples     = 100
)

// consistencyCheck is one check of CheckConsistency: ids selects the rows
// it finds, as "SELECT <id> AS id FROM ...", with cutoff (below) the grace
// cutoff.
type consistencyCheck struct {
	name, description, remedy, ids string
}

// consistencyChecks are the checks in the order they are reported. The
// stranded conditions are the self-check's own (services/internal/stranded),
// so the check shows exactly what the processor's self-check would repair.
// cutoff is the grace cutoff in a check's query.
const cutoff = `(SELECT cutoff FROM params)`

var consistencyChecks = []consistencyCheck{{
	name:        "stranded-applied",
	description: "mailbox IDs of APPLIED messages without a pending projection: no acknowledgement will finish them (the self-check repairs them within its interval)",
	remedy:      "runbook \"Stranded messages (self-check repairs)\"; msgxctl maintenance run self-check",
	ids:         `SELECT ps.msg_id AS id FROM proc_state ps WHERE ` + stranded.AppliedWithoutProjection(cutoff),
}, {
	name:        "stranded-terminal",
	description: "mailbox IDs of finished, unmarked messages without a backfill intent: their mailbox row would never be marked (the self-check repairs them within its interval)",
	remedy:      "runbook \"Stranded messages (self-check repairs)\"; msgxctl maintenance run self-check",
	ids:         `SELECT ps.msg_id AS id FROM proc_state ps WHERE ` + stranded.TerminalWithoutIntent(cutoff),
}, {
	name:        "projection-unacknowledged",
	description: "FLIDs whose change the projector has not acknowledged since before the grace: Redis is behind PostgreSQL for them (the projection is on its way, the flight-state row undelivered, or the projector stalled)",
	remedy:      "msgxctl outbox list --target " + outbox.FlightState + "; runbook \"Redis lost the projection\"",
	ids: `SELECT DISTINCT pp.flid AS id FROM projection_pending pp JOIN proc_state ps ON ps.msg_id = pp.msg_id
		WHERE COALESCE(ps.applied_at, ps.updated_at) < ` + cutoff,
}, {
	name:        "outbox-undelivered",
	description: "outbox IDs still PENDING, created before the grace: side effects not yet delivered (retrying, or waiting behind a parked key)",
	remedy:      "msgxctl outbox list --state pending; msgxctl outbox parked",
	ids:         `SELECT id FROM outbox WHERE state = 'PENDING' AND created_at < ` + cutoff,
}, {
	name:        "outbox-dead",
	description: "outbox IDs dead-lettered: side effects that will not be delivered until an operator re-queues or discards them",
	remedy:      "runbook \"Dead letters (outbox DLQ)\"; msgxctl outbox list --state dead",
	ids:         `SELECT id FROM outbox WHERE state = 'DEAD'`,
}, {
	name:        "version-regression",
	description: "FLIDs whose live version is not above an archived version of the same flight: consumers that keep the highest version would drop the live state (R-L1)",
	remedy:      "msgxctl flight trail FLID; msgxctl flight archived FLID",
	ids: `SELECT f.flid AS id FROM flight f
		WHERE EXISTS (SELECT 1 FROM flight_history h WHERE h.flid = f.flid AND h.state_version >= f.state_version)`,
}}

// CheckConsistency runs every check in one read-only snapshot (R-N9).
func (s *InspectServer) CheckConsistency(ctx context.Context, req *controlv1.CheckConsistencyRequest) (*controlv1.CheckConsistencyResponse, error) {
	grace := defaultConsistencyGrace
	switch g := req.GetGraceSeconds(); {
	case g < 0:
		return nil, status.Errorf(codes.InvalidArgument, "grace_seconds %d: must not be negative (0 means %d)", g, int(defaultConsistencyGrace.Seconds()))
	case g > 0:
		grace = time.Duration(g) * time.Second
	}
	samples := int(req.GetSamples())
	switch {
	case samples < 0:
		return nil, status.Errorf(codes.InvalidArgument, "samples %d: must not be negative (0 means %d)", samples, defaultConsistencySamples)
	case samples == 0:
		samples = defaultConsistencySamples
	case samples > maxConsistencySamples:
		samples = maxConsistencySamples
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	resp := &controlv1.CheckConsistencyResponse{Ok: true}
	err := pgx.BeginTxFunc(qctx, s.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(qctx, `SELECT now()`).Scan(&now); err != nil {
			return fmt.Errorf("reading the database clock: %w", err)
		}
		resp.CheckedAt = timestamppb.New(now)
		cutoff := now.Add(-grace)
		for _, c := range consistencyChecks {
			f := &controlv1.ConsistencyFinding{Name: c.name, Description: c.description, Remedy: c.remedy}
			err := tx.QueryRow(qctx, `
				WITH params AS (SELECT $1::timestamptz AS cutoff), found AS (`+c.ids+`)
				SELECT (SELECT count(*) FROM found),
					ARRAY(SELECT id FROM found ORDER BY id LIMIT $2)`, cutoff, samples).Scan(&f.Count, &f.SampleIds)
			if err != nil {
				return fmt.Errorf("check %s: %w", c.name, err)
			}
			resp.Ok = resp.Ok && f.Count == 0
			resp.Findings = append(resp.Findings, f)
		}
		return nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "checking consistency", err)
	}
	return resp, nil
}
