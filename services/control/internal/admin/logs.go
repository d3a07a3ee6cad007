package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/nullable"
	"msgexchange/services/control/internal/paging"
	"msgexchange/services/control/internal/rpcstatus"
)

// ListSnapshotLog lists the snapshot log (R-L7, SCHD_SNAP_LOG), newest
// first.
func (s *InspectServer) ListSnapshotLog(ctx context.Context, req *controlv1.ListSnapshotLogRequest) (*controlv1.ListSnapshotLogResponse, error) {
	limit, err := paging.Limit(req.GetLimit(), DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name string
		v    int64
	}{{"msg_id", req.GetMsgId()}, {"before_id", req.GetBeforeId()}} {
		if err := paging.NotNegative(c.name, c.v); err != nil {
			return nil, err
		}
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.db.Query(qctx, `
		SELECT id, msg_id, styp, ARRAY(SELECT to_char(d, 'YYYY-MM-DD') FROM unnest(days) AS d ORDER BY d),
			records, changed, deleted, unchanged, batches, started_at, finished_at, outcome
		FROM snapshot_log
		WHERE ($1 = 0 OR msg_id = $1) AND ($2 = 0 OR id < $2)
		ORDER BY id DESC LIMIT $3`, req.GetMsgId(), req.GetBeforeId(), limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing the snapshot log", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.SnapshotLogEntry, error) {
		var (
			e                 controlv1.SnapshotLogEntry
			started, finished time.Time
		)
		if err := r.Scan(&e.Id, &e.MsgId, &e.Styp, &e.Days, &e.Records, &e.Changed, &e.Deleted, &e.Unchanged,
			&e.Batches, &started, &finished, &e.Outcome); err != nil {
			return nil, err
		}
		e.StartedAt, e.FinishedAt = timestamppb.New(started), timestamppb.New(finished)
		e.DurationMs = finished.Sub(started).Milliseconds()
		return &e, nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing the snapshot log", err)
	}
	page, last, more := paging.Trim(list, limit)
	resp := &controlv1.ListSnapshotLogResponse{Entries: page}
	if more {
		resp.NextBeforeId = last.GetId()
	}
	return resp, nil
}

// reuseCursor is the position of a mailbox_reuse row in the listing's
// order (detected_at, msg_id, text_sha256, all descending), as a page
// token "<detected_at unix µs>.<msg_id>.<text_sha256>".
type reuseCursor struct {
	detected time.Time
	msgID    int64
	sha      string
}

func (c reuseCursor) token() string {
	return fmt.Sprintf("%d.%d.%s", c.detected.UnixMicro(), c.msgID, c.sha)
}

func parseReuseCursor(tok string) (*reuseCursor, error) {
	if tok == "" {
		return nil, nil
	}
	parts := strings.SplitN(tok, ".", 3)
	if len(parts) == 3 {
		us, err1 := strconv.ParseInt(parts[0], 10, 64)
		id, err2 := strconv.ParseInt(parts[1], 10, 64)
		if err1 == nil && err2 == nil {
			return &reuseCursor{detected: time.UnixMicro(us), msgID: id, sha: parts[2]}, nil
		}
	}
	return nil, status.Errorf(codes.InvalidArgument, "page_token %q: not a token of this listing", tok)
}

// ListMailboxReuse lists the mailbox IDs seen again with a different text
// (R-L5), newest detection first.
func (s *InspectServer) ListMailboxReuse(ctx context.Context, req *controlv1.ListMailboxReuseRequest) (*controlv1.ListMailboxReuseResponse, error) {
	limit, err := paging.Limit(req.GetLimit(), DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if err := paging.NotNegative("msg_id", req.GetMsgId()); err != nil {
		return nil, err
	}
	cur, err := parseReuseCursor(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	var (
		after    *time.Time
		afterID  int64
		afterSHA string
	)
	if cur != nil {
		after, afterID, afterSHA = &cur.detected, cur.msgID, cur.sha
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.db.Query(qctx, `
		SELECT msg_id, text_sha256, first_sha256, received_at, detected_at, last_seen_at, seen,
			CASE WHEN $2 THEN raw ELSE '' END, CASE WHEN $2 THEN first_raw ELSE '' END
		FROM mailbox_reuse
		WHERE ($1 = 0 OR msg_id = $1)
		  AND ($3::timestamptz IS NULL OR (detected_at, msg_id, text_sha256) < ($3, $4, $5))
		ORDER BY detected_at DESC, msg_id DESC, text_sha256 DESC LIMIT $6`,
		req.GetMsgId(), req.GetWithTexts(), after, afterID, afterSHA, limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing reused mailbox IDs", err)
	}
	var curs []reuseCursor
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.MailboxReuse, error) {
		var (
			e              controlv1.MailboxReuse
			received       *time.Time
			detected, seen time.Time
		)
		if err := r.Scan(&e.MsgId, &e.TextSha256, &e.FirstSha256, &received, &detected, &seen, &e.Seen, &e.Raw, &e.FirstRaw); err != nil {
			return nil, err
		}
		e.ReceivedAt, e.DetectedAt, e.LastSeenAt = nullable.Timestamp(received), timestamppb.New(detected), timestamppb.New(seen)
		curs = append(curs, reuseCursor{detected: detected, msgID: e.MsgId, sha: e.TextSha256})
		return &e, nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing reused mailbox IDs", err)
	}
	page, _, more := paging.Trim(list, limit)
	resp := &controlv1.ListMailboxReuseResponse{Entries: page}
	if more {
		resp.NextPageToken = curs[limit-1].token()
	}
	return resp, nil
}

// auditRows is every audit table in one shape (AuditEntry), kind by the
// AuditKind number. Each table's columns that the common shape has no
// place for go into detail. Listing all kinds reads every table: audit
// tables are small (one row per operator action, lease changes), and the
// listing is an operator's, not a hot path.
const auditRows = `
	SELECT 1 AS kind, id, at, action, operator, principal, peer, reason,
		CASE WHEN action = 'resend'
			THEN 'outbox ' || target || ': ' || cardinality(outbox_ids) || ' rows' ||
				COALESCE(' ' || outbox_ids[1] || '…' || outbox_ids[cardinality(outbox_ids)], '')
			ELSE 'outbox ' || array_to_string(outbox_ids, ',') END AS subject,
		CASE WHEN action = 'resend'
			THEN jsonb_build_object('target', target, 'sent_since', sent_since, 'sent_until', sent_until)
			ELSE '{}'::jsonb END AS detail
	FROM outbox_requeue_audit
	UNION ALL
	SELECT 2, id, at, action, operator, principal, peer, reason, 'outbox ' || array_to_string(outbox_ids, ','), '{}'
	FROM outbox_discard_audit
	UNION ALL
	SELECT 3, id, at, action, COALESCE(operator, holder), principal, peer, reason, 'lease ' || name,
		jsonb_build_object('holder', holder, 'token', token)
	FROM lease_audit
	UNION ALL
	SELECT 4, a.id, a.at, 'replay', a.operator, r.principal, r.peer, a.reason, 'message ' || a.msg_id,
		jsonb_build_object('request_id', a.request_id, 'previous_state', a.previous_state, 'previous_class', a.previous_class,
			'previous_attempts', a.previous_attempts, 'previous_reason', a.previous_reason)
	FROM replay_audit a JOIN replay_request r ON r.id = a.request_id
	UNION ALL
	SELECT 5, id, at, 'end', operator, principal, peer, reason, 'message ' || msg_id,
		jsonb_build_object('previous_state', previous_state, 'previous_class', previous_class,
			'previous_attempts', previous_attempts, 'previous_reason', previous_reason, 'backfill_outbox_id', backfill_outbox_id)
	FROM message_end_audit
	UNION ALL
	SELECT 6, id, requested_at, 'rebuild', operator, principal, peer, reason, 'projection',
		jsonb_build_object('flights', flights, 'active', active, 'deleted', deleted, 'max_msg_id', max_msg_id)
	FROM projection_rebuild
	UNION ALL
	SELECT 7, id, registered_at, type, operator, principal, peer, reason, 'request ' || id,
		jsonb_build_object('state', state, 'stdb', stdb, 'stde', stde, 'rtyp', rtyp, 'sender', sender, 'seqn', seqn)
	FROM req_track
	UNION ALL
	SELECT 8, id, requested_at, job || CASE WHEN dry_run THEN ' (dry run)' ELSE '' END, operator, principal, peer, reason,
		'maintenance request ' || id, jsonb_build_object('state', state, 'run_id', run_id, 'error', error)
	FROM maintenance_request
	UNION ALL
	SELECT 9, id, requested_at, 'census', operator, principal, peer, NULL, 'mailbox census ' || id,
		jsonb_build_object('state', state, 'start_id', start_id, 'error', error)
	FROM mailbox_census`

// auditCursor is the position of an audit row in the listing's order (at,
// kind, id, all descending), as a page token "<at unix µs>.<kind>.<id>".
type auditCursor struct {
	at       time.Time
	kind, id int64
}

func (c auditCursor) token() string { return fmt.Sprintf("%d.%d.%d", c.at.UnixMicro(), c.kind, c.id) }

func parseAuditCursor(tok string) (*auditCursor, error) {
	if tok == "" {
		return nil, nil
	}
	if parts := strings.Split(tok, "."); len(parts) == 3 {
		us, err1 := strconv.ParseInt(parts[0], 10, 64)
		kind, err2 := strconv.ParseInt(parts[1], 10, 64)
		id, err3 := strconv.ParseInt(parts[2], 10, 64)
		if err1 == nil && err2 == nil && err3 == nil {
			return &auditCursor{at: time.UnixMicro(us), kind: kind, id: id}, nil
		}
	}
	return nil, status.Errorf(codes.InvalidArgument, "page_token %q: not a token of this listing", tok)
}

// ListAudit lists the rows of every audit table, newest first (R-N9).
func (s *InspectServer) ListAudit(ctx context.Context, req *controlv1.ListAuditRequest) (*controlv1.ListAuditResponse, error) {
	limit, err := paging.Limit(req.GetLimit(), DefaultListLimit, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if _, ok := controlv1.AuditKind_name[int32(req.GetKind())]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "kind %d: unknown audit kind", req.GetKind())
	}
	cur, err := parseAuditCursor(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	var (
		since, before *time.Time
		bKind, bID    int64
	)
	if req.GetSince() != nil {
		t := req.GetSince().AsTime()
		since = &t
	}
	if cur != nil {
		before, bKind, bID = &cur.at, cur.kind, cur.id
	}
	qctx, cancel := context.WithTimeout(ctx, s.queryTimeout)
	defer cancel()
	rows, err := s.db.Query(qctx, `
		SELECT kind, id, at, action, operator, COALESCE(principal, ''), COALESCE(peer, ''), COALESCE(reason, ''), subject, detail
		FROM (`+auditRows+`) a
		WHERE ($1 = 0 OR kind = $1) AND ($2 = '' OR operator = $2) AND ($3::timestamptz IS NULL OR at >= $3)
		  AND ($4::timestamptz IS NULL OR (at, kind, id) < ($4, $5, $6))
		ORDER BY at DESC, kind DESC, id DESC LIMIT $7`,
		int32(req.GetKind()), req.GetOperator(), since, before, bKind, bID, limit+1)
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing audit rows", err)
	}
	var curs []auditCursor
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*controlv1.AuditEntry, error) {
		var (
			e      controlv1.AuditEntry
			kind   int32
			at     time.Time
			detail json.RawMessage
		)
		if err := r.Scan(&kind, &e.Id, &at, &e.Action, &e.Operator, &e.Principal, &e.Peer, &e.Reason, &e.Subject, &detail); err != nil {
			return nil, err
		}
		e.Kind, e.At, e.DetailJson = controlv1.AuditKind(kind), timestamppb.New(at), string(detail)
		curs = append(curs, auditCursor{at: at, kind: int64(kind), id: e.Id})
		return &e, nil
	})
	if err != nil {
		return nil, rpcstatus.QueryError(s.logger, "listing audit rows", err)
	}
	page, _, more := paging.Trim(list, limit)
	resp := &controlv1.ListAuditResponse{Entries: page}
	if more {
		resp.NextPageToken = curs[limit-1].token()
	}
	return resp, nil
}
