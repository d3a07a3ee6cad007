package decide

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"msgexchange/libs/clip"
	"msgexchange/services/internal/sis"
	"msgexchange/services/internal/sisrequest"
)

// Match kinds recorded in req_track.match_kind (C-23).
const (
	// MatchExact: the response echoed the request's window (SCHD/STDB and
	// SCHD/STDE equal to the request's).
	MatchExact = "exact"
	// MatchFallback: no echo; the oldest open request of the same type and
	// scope sent no later than the response's DTTM. Not a proven
	// correlation; recorded and logged for audit.
	MatchFallback = "fallback"
)

// Request is an open (SENT or WAITING) request a response may answer.
type Request struct {
	ID         int64
	STDB, STDE string
	SentAt     time.Time
	// Deadline is timeout_at, or sent_at plus the type's timeout while the
	// timer is not armed yet.
	Deadline time.Time
}

// RequestMatch is the request a response answers.
type RequestMatch struct {
	ID   int64
	Kind string
	// Candidates and SentAt describe a fallback match for its audit log:
	// how many open requests were eligible, when the chosen one was sent.
	Candidates int
	SentAt     time.Time
	// Stored: the match was made by an earlier step of the message (an
	// SCHD RESP's first batch) and read from its progress, so the request
	// is not locked and may have been closed since.
	Stored bool
}

// RequestView is what matching a response to its request reads.
type RequestView interface {
	// OpenRequests returns the open (SENT, WAITING) requests of typ, of
	// reference type rtyp for RQRD ("" for any), oldest sent first,
	// locked until the message's transaction ends.
	OpenRequests(ctx context.Context, typ, rtyp string) ([]Request, error)
	// ReceivedAt is when the message reached the mailbox, or when the
	// processor registered it where that is unknown: deadlines are judged
	// by it, so a response that arrived in time is not lost to a busy
	// processor.
	ReceivedAt(ctx context.Context) (time.Time, error)
	// RequestState returns the state and closed reason of request id,
	// locked; found is false when the request is no longer tracked.
	RequestState(ctx context.Context, id int64) (state, closedReason string, found bool, err error)
}

// RequestClose makes request ID DONE, answered by message MsgID.
type RequestClose struct {
	Type  string
	ID    int64
	Kind  string
	MsgID int64
	Now   time.Time
}

// Reason is the closed_reason the close records.
func (c RequestClose) Reason() string {
	return fmt.Sprintf("answered by message %d (%s match)", c.MsgID, c.Kind)
}

// RequestSink receives the close of an answered request.
type RequestSink interface {
	// CloseRequest closes an open request; it fails with ErrRequestNotOpen
	// when the request is not open.
	CloseRequest(ctx context.Context, op RequestClose) error
}

// ErrRequestNotOpen means a locked open request was found closed: a bug.
var ErrRequestNotOpen = errors.New("request is no longer open")

// Requests matches responses to their requests (C-23, R-C7, R-D5): it
// reads through View and closes through Sink. Zone is the airport zone in
// which DTTM is read and times are written in reasons.
type Requests struct {
	View  RequestView
	Sink  RequestSink
	Zone  *time.Location
	MsgID int64
	Now   time.Time
	// Log receives the audit of matches (a fallback is not a proven
	// correlation, C-23) and closes; nil discards it.
	Log *slog.Logger
}

// MatchRQFD finds the open RQFD request an SCHD RESP answers (C-23). An
// echo of the window (SCHD/STDB and SCHD/STDE both present) is
// authoritative: it matches only the open request of exactly that window.
// Without an echo the fallback applies. A request matches only while the
// response arrived no later than its deadline. The result is a match, or a
// reason for skipping.
func (q *Requests) MatchRQFD(ctx context.Context, msg *sis.Message) (*RequestMatch, string, error) {
	open, err := q.View.OpenRequests(ctx, sisrequest.TypeRQFD, "")
	if err != nil {
		return nil, "", err
	}
	if len(open) == 0 {
		return nil, "no RQFD request is open", nil
	}
	received, err := q.View.ReceivedAt(ctx)
	if err != nil {
		return nil, "", err
	}
	schd := msg.Root.Child("SCHD")
	stdb, stde := schd.Child("STDB").Value(), schd.Child("STDE").Value()
	if stdb != "" && stde != "" {
		for _, r := range open {
			if strings.TrimSpace(r.STDB) != stdb || strings.TrimSpace(r.STDE) != stde {
				continue
			}
			if received.After(r.Deadline) {
				return nil, fmt.Sprintf("echoed window %s..%s is RQFD request %d's, but the response arrived at %s, after its deadline %s",
					stdb, stde, r.ID, q.airport(received), q.airport(r.Deadline)), nil
			}
			return &RequestMatch{ID: r.ID, Kind: MatchExact, SentAt: r.SentAt}, "", nil
		}
		return nil, fmt.Sprintf("echoed window %s..%s matches none of the %d open RQFD requests", stdb, stde, len(open)), nil
	}
	m, why := q.fallback(msg, open, received)
	if m == nil {
		return nil, why, nil
	}
	return m, "", nil
}

// MatchRQRD finds the open RQRD request of the message's reference type
// that a reference RESP answers (R-D5), by the fallback. Without a match
// it returns why; why is empty when no such request is open.
func (q *Requests) MatchRQRD(ctx context.Context, msg *sis.Message) (*RequestMatch, string, error) {
	open, err := q.View.OpenRequests(ctx, sisrequest.TypeRQRD, msg.Meta.TYPE)
	if err != nil {
		return nil, "", err
	}
	if len(open) == 0 {
		return nil, "", nil
	}
	received, err := q.View.ReceivedAt(ctx)
	if err != nil {
		return nil, "", err
	}
	m, why := q.fallback(msg, open, received)
	return m, why, nil
}

// fallback picks the oldest open request sent no later than the response's
// DTTM (compared in the airport zone, at whole seconds: DTTM has no
// fractions) whose deadline the response's arrival did not pass (C-23:
// accepted, audited, not a proven correlation).
func (q *Requests) fallback(msg *sis.Message, open []Request, received time.Time) (*RequestMatch, string) {
	dttm, err := sisrequest.ParseDTTM(msg.Meta.DTTM, q.zone())
	if err != nil {
		return nil, "no echo and " + err.Error() + ", so the response cannot be placed after a request"
	}
	var eligible []Request
	late := 0
	for _, r := range open {
		if r.SentAt.Truncate(time.Second).After(dttm) {
			continue
		}
		if received.After(r.Deadline) {
			late++
			continue
		}
		eligible = append(eligible, r)
	}
	if len(eligible) == 0 {
		if late > 0 {
			return nil, fmt.Sprintf("the response arrived at %s, after the deadline of every open request sent by its DTTM %s", q.airport(received), msg.Meta.DTTM)
		}
		return nil, fmt.Sprintf("every open request was sent after the response's DTTM %s", msg.Meta.DTTM)
	}
	return &RequestMatch{ID: eligible[0].ID, Kind: MatchFallback, Candidates: len(eligible), SentAt: eligible[0].SentAt}, ""
}

// Answer is what closing an answered request did.
type Answer struct {
	// Suffix is the part of the message's reason that names the request.
	Suffix string
	// Closed: the request was closed by this message. Otherwise a stored
	// match's request was closed meanwhile (State, ClosedReason) or is no
	// longer tracked (Gone), and stays as it is.
	Closed              bool
	Gone                bool
	State, ClosedReason string
}

// Close closes the request m of type typ once the response was applied. A
// request matched in this transaction is locked and open and is closed. A
// stored match (see RequestMatch.Stored) may name a request that was
// closed, or purged after request.retention, since: it is left as it is
// (a late answer never changes a closed request, R-D5), and the suffix
// says so.
func (q *Requests) Close(ctx context.Context, typ string, m *RequestMatch) (Answer, error) {
	a := Answer{Suffix: fmt.Sprintf("; answers %s request %d (%s match)", typ, m.ID, m.Kind)}
	if m.Stored {
		state, reason, found, err := q.View.RequestState(ctx, m.ID)
		if err != nil {
			return Answer{}, err
		}
		switch {
		case !found:
			a.Gone = true
			a.Suffix += ", no longer tracked when the package finished"
			q.logAnswer(typ, m, a)
			return a, nil
		case state != "SENT" && state != "WAITING":
			a.State, a.ClosedReason = state, reason
			a.Suffix += fmt.Sprintf(", which was closed meanwhile (%s: %s) and stays closed", state, clip.N(reason, 200))
			q.logAnswer(typ, m, a)
			return a, nil
		}
	}
	if err := q.Sink.CloseRequest(ctx, RequestClose{Type: typ, ID: m.ID, Kind: m.Kind, MsgID: q.MsgID, Now: q.Now}); err != nil {
		return Answer{}, err
	}
	a.Closed = true
	q.logAnswer(typ, m, a)
	return a, nil
}

// logMatch logs a new match; a fallback is logged for audit (C-23:
// accepted, not a proven correlation).
func (q *Requests) logMatch(msg *sis.Message, m *RequestMatch) {
	if m.Kind == MatchExact {
		schd := msg.Root.Child("SCHD")
		q.log().Info("SCHD RESP matched its RQFD request by the echoed window", "msg_id", q.MsgID, "request_id", m.ID,
			"stdb", schd.Child("STDB").Value(), "stde", schd.Child("STDE").Value())
		return
	}
	q.log().Warn("response matched by fallback (same type, open, DTTM at or after sending): not a proven correlation",
		"type", msg.Meta.TYPE, "styp", msg.Meta.STYP, "seqn", msg.Meta.SEQN, "dttm", msg.Meta.DTTM,
		"request_id", m.ID, "sent_at", q.airport(m.SentAt), "candidates", m.Candidates, "audit", "request-fallback-match")
}

// logAnswer logs what closing the answered request did.
func (q *Requests) logAnswer(typ string, m *RequestMatch, a Answer) {
	switch {
	case a.Closed:
		q.log().Info("request answered", "msg_id", q.MsgID, "request_id", m.ID, "type", typ, "match_kind", m.Kind)
	case a.Gone:
		q.log().Warn("SCHD RESP finished; the RQFD request it answered is no longer tracked (purged)",
			"msg_id", q.MsgID, "request_id", m.ID, "match_kind", m.Kind)
	default:
		q.log().Warn("SCHD RESP finished; the RQFD request it answered was closed while the package was written and stays closed",
			"msg_id", q.MsgID, "request_id", m.ID, "match_kind", m.Kind, "request_state", a.State, "closed_reason", a.ClosedReason)
	}
}

func (q *Requests) log() *slog.Logger {
	if q.Log != nil {
		return q.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (q *Requests) zone() *time.Location {
	if q.Zone != nil {
		return q.Zone
	}
	return time.UTC
}

// airport formats t in the airport zone for reasons.
func (q *Requests) airport(t time.Time) string {
	return t.In(q.zone()).Format(time.DateTime)
}
