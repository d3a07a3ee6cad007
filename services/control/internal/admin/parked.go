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
)

// parkingTargets are the event targets on which a DEAD row parks its key
// (R-L3); schd carries the latest state and parks nothing, and the
// mailbox and COUTMSGS targets have no per-key order.
var parkingTargets = []string{"flight-state", "msg", "projection-control"}

// ListParkedKeys returns one page of parked keys: the DEAD rows of the
// event targets with the number of later rows of their key waiting behind
// them, in ascending ID order (R-L3).
func (s *Server) ListParkedKeys(ctx context.Context, req *controlv1.ListParkedKeysRequest) (*controlv1.ListParkedKeysResponse, error) {
	limit, err := pageLimit(req.GetLimit())
	if err == nil && req.GetAfterId() < 0 {
		err = fmt.Errorf("after_id %d: must not be negative", req.GetAfterId())
	}
	targets := parkingTargets
	if t := req.GetTarget(); t != "" && err == nil {
		err = fmt.Errorf("target %q: keys park only on %v", t, parkingTargets)
		for _, p := range parkingTargets {
			if t == p {
				targets, err = []string{t}, nil
			}
		}
	}
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	entries, err := queryParked(qctx, s.db, targets, req.GetAfterId(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing parked keys", err)
	}
	resp := &controlv1.ListParkedKeysResponse{Entries: entries}
	if len(entries) > limit {
		resp.Entries = entries[:limit]
		resp.NextAfterId = resp.Entries[limit-1].GetDeadId()
	}
	return resp, nil
}

// queryParked reads up to n DEAD rows of targets after afterID, each with
// the PENDING rows of its key behind it (outbox_dead_key_idx, the retry
// lane's key index).
func queryParked(ctx context.Context, db pgxQuerier, targets []string, afterID int64, n int) ([]*controlv1.ParkedKey, error) {
	rows, err := db.Query(ctx, `
SELECT d.target, d.pkey, d.id, d.msg_id, d.created_at, d.last_error,
       (SELECT count(*) FROM outbox p WHERE p.target = d.target AND p.pkey = d.pkey AND p.state = 'PENDING' AND p.id > d.id)
FROM outbox d
WHERE d.state = 'DEAD' AND d.target = ANY($1) AND d.id > $2
ORDER BY d.id
LIMIT $3`, targets, afterID, n)
	if err != nil {
		return nil, fmt.Errorf("querying parked keys: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*controlv1.ParkedKey, error) {
		var (
			e       controlv1.ParkedKey
			msgID   *int64
			created time.Time
			lastErr *string
		)
		if err := row.Scan(&e.Target, &e.Key, &e.DeadId, &msgID, &created, &lastErr, &e.Waiting); err != nil {
			return nil, fmt.Errorf("reading parked key: %w", err)
		}
		if msgID != nil {
			e.MsgId = *msgID
		}
		if lastErr != nil {
			e.LastError = *lastErr
		}
		e.CreatedAt = timestamppb.New(created)
		return &e, nil
	})
}
