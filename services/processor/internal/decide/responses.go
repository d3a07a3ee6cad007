package decide

import (
	"context"
	"strings"

	"msgexchange/services/internal/sis"
	"msgexchange/services/internal/sisrequest"
)

// ScheduleResponse applies one step of an SCHD RESP (R-C7): only as the
// answer to an open RQFD request, as a snapshot exactly like DNLD (see
// Snapshot), closing that request in the step that finishes the package.
// Without a match it is a Skip with the reason and nothing is written.
//
// The match is made once, by the step that writes the package's first
// batch, and stored with the progress (R-C6): every later batch, a resumed
// run after a failure and a replayed run continue under it and never match
// again. A package is therefore never left half written and SKIPPED
// because its request was closed between batches — superseded by a newer
// request, expired, or closed by an operator. Such a request stays closed
// (a late answer never changes a closed request, R-D5); the package is
// finished all the same and its note says so.
//
// plan returns the package's plan (PlanSnapshot, or the one a caller kept
// from an earlier step, R-K4); it is asked only once the RESP has its
// request, so a RESP nobody asked for is SKIPPED without being validated.
func ScheduleResponse(ctx context.Context, w *Writer, v SnapshotView, s SnapshotSink, q *Requests, msg *sis.Message, plan func(context.Context) (*SnapshotPlan, error), budget int) (Outcome, error) {
	p, err := v.Progress(ctx)
	if err != nil {
		return Outcome{}, err
	}
	if p.Match != nil {
		q.log().Info("SCHD RESP continues under the RQFD request matched at its first batch",
			"msg_id", q.MsgID, "request_id", p.Match.ID, "match_kind", p.Match.Kind, "records_written", p.Next, "batches", p.Batches)
	} else {
		m, skip, err := q.MatchRQFD(ctx, msg)
		if err != nil {
			return Outcome{}, err
		}
		if skip != "" {
			return Outcome{}, &Skip{Reason: "SCHD RESP without a matching open RQFD request: " + skip}
		}
		q.logMatch(msg, m)
		p.Match = m
	}
	pl, err := plan(ctx)
	if err != nil {
		return Outcome{}, err
	}
	out, err := SnapshotStep(ctx, w, v, s, pl, p, budget)
	if err != nil || out.Continue != "" {
		return out, err
	}
	a, err := q.Close(ctx, sisrequest.TypeRQFD, p.Match)
	if err != nil {
		return Outcome{}, err
	}
	out.Note += a.Suffix
	return out, nil
}

// ReferenceResponse applies a reference-data message that Handles leaves
// to the pipeline (a RESP): its data like a DNLD (Reference, R-C10), then
// the open RQRD request it answers, if any, is closed in the same
// transaction (R-D5). Without a match the RESP is applied all the same, as
// an unsolicited snapshot.
func ReferenceResponse(ctx context.Context, w *Writer, q *Requests, msg *sis.Message) (Outcome, error) {
	out, err := Reference(ctx, w, msg)
	if err != nil || strings.ToUpper(msg.Meta.STYP) != "RESP" {
		return out, err
	}
	m, why, err := q.MatchRQRD(ctx, msg)
	if err != nil {
		return Outcome{}, err
	}
	if m == nil {
		if why == "" {
			q.log().Info("reference RESP without an open RQRD request; applied as an unsolicited snapshot", "msg_id", q.MsgID, "type", msg.Meta.TYPE)
		} else {
			q.log().Info("reference RESP matches no open RQRD request; applied as an unsolicited snapshot", "msg_id", q.MsgID, "type", msg.Meta.TYPE, "why", why)
		}
		return out, nil
	}
	q.logMatch(msg, m)
	a, err := q.Close(ctx, sisrequest.TypeRQRD, m)
	if err != nil {
		return Outcome{}, err
	}
	out.Note += a.Suffix
	return out, nil
}
