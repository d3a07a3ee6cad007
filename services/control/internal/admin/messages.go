package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/rpcstatus"
)

// messageTime is the time ListMessages filters on: when the mailbox
// received the message, or when the processor registered it where the
// mailbox gave no time (GetBacklog ages the oldest unfinished message by
// the same expression). proc_state_received_idx indexes it.
const messageTime = `COALESCE(received_at, registered_at)`

// messageFilter is a validated ListMessages request.
type messageFilter struct {
	states   []string // database names, sorted, unique; empty = every state
	classes  []string // database names, sorted, unique; empty = any class
	noClass  bool     // also (or only, with classes empty) rows without a class
	from, to *time.Time
	afterID  int64
	limit    int
}

// messageFilterFrom validates a ListMessages request, reporting every
// problem at once, and applies the limit defaults.
func messageFilterFrom(req *controlv1.ListMessagesRequest) (messageFilter, error) {
	var (
		f    messageFilter
		errs []error
		err  error
	)
	if f.limit, err = pageLimit(req.GetLimit()); err != nil {
		errs = append(errs, err)
	}
	if f.afterID = req.GetAfterMsgId(); f.afterID < 0 {
		errs = append(errs, fmt.Errorf("after_msg_id %d: must not be negative", f.afterID))
	}
	for _, s := range req.GetStates() {
		v, err := messageStateToDB(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.states = append(f.states, v)
	}
	f.states = slices.Compact(slices.Sorted(slices.Values(f.states)))
	for _, c := range req.GetErrorClasses() {
		v, err := errorClassToDB(c)
		switch {
		case err != nil:
			errs = append(errs, err)
		case v == "":
			f.noClass = true
		default:
			f.classes = append(f.classes, v)
		}
	}
	f.classes = slices.Compact(slices.Sorted(slices.Values(f.classes)))
	if f.from, err = optionalTime("from", req.GetFrom()); err != nil {
		errs = append(errs, err)
	}
	if f.to, err = optionalTime("to", req.GetTo()); err != nil {
		errs = append(errs, err)
	}
	if f.from != nil && f.to != nil && !f.from.Before(*f.to) {
		errs = append(errs, fmt.Errorf("from %s must be before to %s", f.from.Format(time.RFC3339), f.to.Format(time.RFC3339)))
	}
	if len(errs) > 0 {
		return messageFilter{}, errors.Join(errs...)
	}
	return f, nil
}

// optionalTime converts an optional bound of a time range; absent is nil.
func optionalTime(field string, ts *timestamppb.Timestamp) (*time.Time, error) {
	if ts == nil {
		return nil, nil
	}
	if err := ts.CheckValid(); err != nil {
		return nil, fmt.Errorf("%s: not a valid timestamp: %w", field, err)
	}
	t := ts.AsTime()
	return &t, nil
}

// ListMessages returns one page of processing records in ascending
// mailbox ID order.
func (s *Server) ListMessages(ctx context.Context, req *controlv1.ListMessagesRequest) (*controlv1.ListMessagesResponse, error) {
	f, err := messageFilterFrom(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	msgs, err := queryMessages(qctx, s.db, f)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing messages", err)
	}
	resp := &controlv1.ListMessagesResponse{Messages: msgs}
	if len(msgs) > f.limit {
		resp.Messages = msgs[:f.limit]
		resp.NextAfterMsgId = resp.Messages[f.limit-1].GetMsgId()
	}
	return resp, nil
}

// queryMessages returns up to limit+1 records matching f (the extra one
// tells the caller whether another page exists).
//
// Why one subquery per state: an ordered range of one index per state,
// each stopping after limit+1 rows, costs O(states × page) however large
// proc_state is (plus the rows of those states that the class and time
// filters skip), where one scan with "state = ANY" would walk the primary
// key through every row of the other states. The states are literals from
// the enum (never caller text), so each subquery matches its partial index
// (proc_state_open_idx, proc_state_applied_idx,
// proc_state_dead_skipped_idx; SUCCEEDED, nearly every row, takes the
// primary key). The other filters are parameters; the WHERE clause names
// only the filters in use.
func queryMessages(ctx context.Context, db pgxQuerier, f messageFilter) ([]*controlv1.Message, error) {
	args := []any{f.afterID, f.limit + 1}
	conds := []string{"msg_id > $1"}
	if len(f.classes) > 0 || f.noClass {
		var alt []string
		if len(f.classes) > 0 {
			args = append(args, f.classes)
			alt = append(alt, "error_class = ANY($"+strconv.Itoa(len(args))+")")
		}
		if f.noClass {
			alt = append(alt, "error_class IS NULL")
		}
		conds = append(conds, "("+strings.Join(alt, " OR ")+")")
	}
	if f.from != nil {
		args = append(args, *f.from)
		conds = append(conds, messageTime+" >= $"+strconv.Itoa(len(args)))
	}
	if f.to != nil {
		args = append(args, *f.to)
		conds = append(conds, messageTime+" < $"+strconv.Itoa(len(args)))
	}
	where := strings.Join(conds, " AND ")
	page := func(extra string) string {
		return `SELECT ` + messageColumns + ` FROM proc_state WHERE ` + extra + where + ` ORDER BY msg_id LIMIT $2`
	}
	var q string
	switch len(f.states) {
	case 0:
		q = page("")
	case 1:
		q = page("state = '" + f.states[0] + "' AND ")
	default:
		parts := make([]string, len(f.states))
		for i, st := range f.states {
			parts[i] = "(" + page("state = '"+st+"' AND ") + ")"
		}
		q = `SELECT * FROM (` + strings.Join(parts, " UNION ALL ") + `) m ORDER BY msg_id LIMIT $2`
	}
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("querying messages: %w", err)
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*controlv1.Message, error) {
		return scanMessage(row, false)
	})
	if err != nil {
		return nil, fmt.Errorf("reading messages: %w", err)
	}
	return msgs, nil
}
