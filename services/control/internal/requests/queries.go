package requests

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/nullable"
)

// The protobuf enums are the database's text values with a type prefix, so
// the mapping is by name: WAITING ↔ REQUEST_STATE_WAITING, fallback ↔
// MATCH_KIND_FALLBACK. A database value with no enum counterpart is a
// schema/contract mismatch and an error, never silently UNSPECIFIED.
const (
	typePrefix  = "REQUEST_TYPE_"
	statePrefix = "REQUEST_STATE_"
	matchPrefix = "MATCH_KIND_"
)

func enumFromDB(prefix, kind, v string, values map[string]int32) (int32, error) {
	n, ok := values[prefix+strings.ToUpper(v)]
	if !ok || n == 0 {
		return 0, fmt.Errorf("mapping %s %q from the database: %w", kind, v, errContractMismatch)
	}
	return n, nil
}

func typeFromDB(v string) (controlv1.RequestType, error) {
	n, err := enumFromDB(typePrefix, "request type", v, controlv1.RequestType_value)
	return controlv1.RequestType(n), err
}

func stateFromDB(v string) (controlv1.RequestState, error) {
	n, err := enumFromDB(statePrefix, "request state", v, controlv1.RequestState_value)
	return controlv1.RequestState(n), err
}

// matchFromDB maps a nullable match_kind; NULL is UNSPECIFIED.
func matchFromDB(v *string) (controlv1.MatchKind, error) {
	if v == nil {
		return controlv1.MatchKind_MATCH_KIND_UNSPECIFIED, nil
	}
	n, err := enumFromDB(matchPrefix, "match kind", *v, controlv1.MatchKind_value)
	return controlv1.MatchKind(n), err
}

// stateToDB returns the database text of a ListRequests state filter: ""
// for UNSPECIFIED (no filter), an error for a number outside the enum.
func stateToDB(s controlv1.RequestState) (string, error) {
	name, known := controlv1.RequestState_name[int32(s)]
	if !known {
		return "", fmt.Errorf("state %d: not a value of RequestState", int32(s))
	}
	if s == controlv1.RequestState_REQUEST_STATE_UNSPECIFIED {
		return "", nil
	}
	return strings.TrimPrefix(name, statePrefix), nil
}

// columns are the req_track columns scanRequest reads, in its order.
const columns = `id, type, stdb, stde, rtyp, sender, seqn, state, outbound_id, operator, reason,
	registered_at, sent_at, timeout_at, closed_at, response_msg_id, match_kind, closed_reason, xml`

// queryOne reads one request by ID.
func queryOne(ctx context.Context, q pgx.Tx, id int64) (*controlv1.OutboundRequest, error) {
	rows, err := q.Query(ctx, `SELECT `+columns+` FROM req_track WHERE id=$1`, id)
	if err != nil {
		return nil, fmt.Errorf("reading request %d: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRequest)
	if err != nil {
		return nil, fmt.Errorf("reading request %d: %w", id, err)
	}
	return r, nil
}

// queryList reads up to limit requests, newest first, optionally of one
// state.
func queryList(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, state string, limit int) ([]*controlv1.OutboundRequest, error) {
	var (
		rows pgx.Rows
		err  error
	)
	if state == "" {
		rows, err = q.Query(ctx, `SELECT `+columns+` FROM req_track ORDER BY id DESC LIMIT $1`, limit)
	} else {
		rows, err = q.Query(ctx, `SELECT `+columns+` FROM req_track WHERE state=$1 ORDER BY id DESC LIMIT $2`, state, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("querying requests: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRequest)
	if err != nil {
		return nil, fmt.Errorf("reading requests: %w", err)
	}
	return out, nil
}

// scanRequest reads one row of columns.
func scanRequest(row pgx.CollectableRow) (*controlv1.OutboundRequest, error) {
	var (
		r                     controlv1.OutboundRequest
		typ, state            string
		stdb, stde, rtyp      *string
		outbound, response    *int64
		registered            time.Time
		sent, timeout, closed *time.Time
		match, closedReason   *string
	)
	if err := row.Scan(&r.Id, &typ, &stdb, &stde, &rtyp, &r.Sender, &r.Seqn, &state, &outbound, &r.Operator, &r.Reason,
		&registered, &sent, &timeout, &closed, &response, &match, &closedReason, &r.Xml); err != nil {
		return nil, err
	}
	var err error
	if r.Type, err = typeFromDB(typ); err != nil {
		return nil, err
	}
	if r.State, err = stateFromDB(state); err != nil {
		return nil, err
	}
	if r.MatchKind, err = matchFromDB(match); err != nil {
		return nil, err
	}
	r.Stdb, r.Stde, r.Rtyp, r.ClosedReason = nullable.String(stdb), nullable.String(stde), nullable.String(rtyp), nullable.String(closedReason)
	if outbound != nil {
		r.OutboundId = *outbound
	}
	if response != nil {
		r.ResponseMsgId = *response
	}
	r.RegisteredAt = timestamppb.New(registered)
	r.SentAt, r.TimeoutAt, r.ClosedAt = nullable.Timestamp(sent), nullable.Timestamp(timeout), nullable.Timestamp(closed)
	return &r, nil
}
