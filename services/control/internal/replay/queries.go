package replay

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/nullable"
)

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// match is what a selector matches now.
type match struct {
	candidates []*controlv1.ReplayCandidate // ascending msg_id
	missing    []int64                      // explicit IDs without a record
	truncated  bool
}

// replayable returns the IDs of the replayable candidates.
func (m match) replayable() []int64 {
	var ids []int64
	for _, c := range m.candidates {
		if c.GetReplayable() {
			ids = append(ids, c.GetMsgId())
		}
	}
	return ids
}

const candidateColumns = `msg_id, state, error_class, reason, msg_type, msg_styp, finished_at, updated_at, attempts`

// resolve reads the messages s matches, marks each replayable or not, and
// marks as not replayable the ones already waiting in a pending request.
func resolve(ctx context.Context, q querier, s selector) (match, error) {
	var (
		rows pgx.Rows
		err  error
		m    match
	)
	if len(s.ids) > 0 {
		rows, err = q.Query(ctx, `SELECT `+candidateColumns+` FROM proc_state WHERE msg_id = ANY($1) ORDER BY msg_id`, s.ids)
	} else {
		rows, err = q.Query(ctx, `SELECT `+candidateColumns+` FROM proc_state
			WHERE state IN ('FAILED', 'DEAD') AND error_class = ANY($1)
			  AND COALESCE(finished_at, updated_at) >= $2 AND COALESCE(finished_at, updated_at) < $3
			ORDER BY msg_id LIMIT $4`, s.classes, s.from, s.to, s.limit+1)
	}
	if err != nil {
		return m, fmt.Errorf("reading matched messages: %w", err)
	}
	m.candidates, err = pgx.CollectRows(rows, scanCandidate)
	if err != nil {
		return m, fmt.Errorf("reading matched messages: %w", err)
	}
	if len(s.ids) == 0 && len(m.candidates) > s.limit {
		m.candidates, m.truncated = m.candidates[:s.limit], true
	}
	if len(s.ids) > 0 {
		for _, id := range s.ids {
			if !slices.ContainsFunc(m.candidates, func(c *controlv1.ReplayCandidate) bool { return c.GetMsgId() == id }) {
				m.missing = append(m.missing, id)
			}
		}
	}
	ids := m.replayable()
	if len(ids) == 0 {
		return m, nil
	}
	waiting, err := pendingRequests(ctx, q, ids)
	if err != nil {
		return m, err
	}
	for _, c := range m.candidates {
		if req, ok := waiting[c.GetMsgId()]; ok && c.GetReplayable() {
			c.Replayable = false
			c.Refusal = "already waiting in replay request " + strconv.FormatInt(req, 10)
		}
	}
	return m, nil
}

func scanCandidate(row pgx.CollectableRow) (*controlv1.ReplayCandidate, error) {
	var (
		c             controlv1.ReplayCandidate
		state         string
		class, reason *string
		typ, styp     *string
		finished      *time.Time
		updated       time.Time
	)
	if err := row.Scan(&c.MsgId, &state, &class, &reason, &typ, &styp, &finished, &updated, &c.Attempts); err != nil {
		return nil, err
	}
	var err error
	if c.State, err = messageStateFromDB(state); err != nil {
		return nil, err
	}
	if c.ErrorClass, err = errorClassFromDB(class); err != nil {
		return nil, err
	}
	c.Reason, c.Type, c.Styp = nullable.String(reason), nullable.String(typ), nullable.String(styp)
	c.FinishedAt, c.UpdatedAt = nullable.Timestamp(finished), timestamppb.New(updated)
	c.Refusal = refusal(state, class)
	c.Replayable = c.Refusal == ""
	return &c, nil
}

// pendingRequests maps each of ids that a PENDING replay request names to
// that request.
func pendingRequests(ctx context.Context, q querier, ids []int64) (map[int64]int64, error) {
	rows, err := q.Query(ctx, `
		SELECT DISTINCT ON (m) m, r.id FROM replay_request r, unnest(r.msg_ids) AS m
		WHERE r.state = 'PENDING' AND r.msg_ids && $1 AND m = ANY($1)
		ORDER BY m, r.id`, ids)
	if err != nil {
		return nil, fmt.Errorf("reading pending replay requests: %w", err)
	}
	out := map[int64]int64{}
	var msgID, reqID int64
	_, err = pgx.ForEachRow(rows, []any{&msgID, &reqID}, func() error {
		out[msgID] = reqID
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading pending replay requests: %w", err)
	}
	return out, nil
}

// requestColumns are the replay_request columns scanRequest reads.
const requestColumns = `id, state, msg_ids, selector, operator, reason, requested_at, applied_at, replayed, refused, refused_ids`

// scanRequest reads a replay_request row of requestColumns, without its
// audit entries.
func scanRequest(row pgx.Row) (*controlv1.ReplayRequest, error) {
	var (
		r                 controlv1.ReplayRequest
		state             string
		selectorJSON      []byte
		requested         time.Time
		applied           *time.Time
		replayed, refused *int32
		refusedIDs        []int64
	)
	err := row.Scan(&r.Id, &state, &r.MsgIds, &selectorJSON, &r.Operator, &r.Reason,
		&requested, &applied, &replayed, &refused, &refusedIDs)
	if err != nil {
		return nil, err
	}
	if r.State, err = requestStateFromDB(state); err != nil {
		return nil, err
	}
	r.SelectorJson = string(selectorJSON)
	r.RequestedAt, r.AppliedAt = timestamppb.New(requested), nullable.Timestamp(applied)
	if replayed != nil {
		r.Replayed = int64(*replayed)
	}
	if refused != nil {
		r.Refused = int64(*refused)
	}
	r.RefusedIds = refusedIDs
	return &r, nil
}

// requestStateFromDB maps replay_request.state by name.
func requestStateFromDB(v string) (controlv1.ReplayRequestState, error) {
	n, ok := controlv1.ReplayRequestState_value["REPLAY_REQUEST_STATE_"+v]
	if !ok || n == 0 {
		return 0, fmt.Errorf("mapping replay request state %q from the database: %w", v, errContractMismatch)
	}
	return controlv1.ReplayRequestState(n), nil
}

// queryRequests reads up to limit replay requests with an ID below before
// (0: the newest), in state (empty: any), newest first, without their
// audit entries.
func queryRequests(ctx context.Context, q querier, state string, before int64, limit int) ([]*controlv1.ReplayRequest, error) {
	rows, err := q.Query(ctx, `SELECT `+requestColumns+` FROM replay_request
		WHERE ($1 = '' OR state = $1) AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`, state, before, limit)
	if err != nil {
		return nil, fmt.Errorf("listing replay requests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*controlv1.ReplayRequest, error) { return scanRequest(row) })
	if err != nil {
		return nil, fmt.Errorf("listing replay requests: %w", err)
	}
	return out, nil
}

// queryRequest reads one replay request with its audit entries;
// pgx.ErrNoRows when absent.
func queryRequest(ctx context.Context, q querier, id int64) (*controlv1.ReplayRequest, error) {
	r, err := scanRequest(q.QueryRow(ctx, `SELECT `+requestColumns+` FROM replay_request WHERE id=$1`, id))
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `
		SELECT msg_id, previous_state, previous_class, previous_attempts, previous_reason, at
		FROM replay_audit WHERE request_id=$1 ORDER BY msg_id`, id)
	if err != nil {
		return nil, fmt.Errorf("reading replay audit: %w", err)
	}
	r.Entries, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*controlv1.ReplayAuditEntry, error) {
		var (
			e             controlv1.ReplayAuditEntry
			state         string
			class, reason *string
			at            time.Time
		)
		if err := row.Scan(&e.MsgId, &state, &class, &e.PreviousAttempts, &reason, &at); err != nil {
			return nil, err
		}
		var err error
		if e.PreviousState, err = messageStateFromDB(state); err != nil {
			return nil, err
		}
		if e.PreviousClass, err = errorClassFromDB(class); err != nil {
			return nil, err
		}
		e.PreviousReason, e.At = nullable.String(reason), timestamppb.New(at)
		return &e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading replay audit: %w", err)
	}
	return r, nil
}

// messageStateFromDB maps proc_state.state by name: DEAD ↔
// MESSAGE_STATE_DEAD.
func messageStateFromDB(v string) (controlv1.MessageState, error) {
	n, ok := controlv1.MessageState_value["MESSAGE_STATE_"+v]
	if !ok || n == 0 {
		return 0, fmt.Errorf("mapping message state %q from the database: %w", v, errContractMismatch)
	}
	return controlv1.MessageState(n), nil
}

// errorClassFromDB maps a nullable error_class; NULL is UNSPECIFIED.
func errorClassFromDB(v *string) (controlv1.ErrorClass, error) {
	if v == nil {
		return controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED, nil
	}
	n, ok := controlv1.ErrorClass_value[errorClassPrefix+*v]
	if !ok || n == 0 {
		return 0, fmt.Errorf("mapping error class %q from the database: %w", *v, errContractMismatch)
	}
	return controlv1.ErrorClass(n), nil
}
