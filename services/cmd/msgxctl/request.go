package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// closedReasonWidth bounds the closed_reason column; -json shows it in full.
const closedReasonWidth = 60

// requestCommand is the "request" group: outbound RQFD/RQRD requests to
// the AODB (R-D5).
func requestCommand() *command {
	return &command{
		name: "request",
		subs: []*command{
			{
				name:     "rqfd",
				synopsis: "--stdb X --stde Y --operator O --reason R",
				summary:  "ask the AODB for the daily flight data of a window (answered by SCHD RESP); expires the open request of the same window",
				setup: func(fs *pflag.FlagSet) runFunc {
					stdb := fs.String("stdb", "", "window start, passed to the AODB verbatim (required)")
					stde := fs.String("stde", "", "window end, passed to the AODB verbatim (required)")
					operator, reason := auditFlags(fs)
					return func(ctx context.Context, a *app, args []string) error {
						if err := exactArgs(args); err != nil {
							return err
						}
						if err := requireFlags(map[string]string{"--stdb": *stdb, "--stde": *stde, "--operator": *operator, "--reason": *reason}); err != nil {
							return err
						}
						return a.requestSend(ctx, func(cl controlv1.RequestServiceClient, cctx context.Context) (*controlv1.SendRequestResponse, error) {
							return cl.SendRQFD(cctx, &controlv1.SendRQFDRequest{Stdb: *stdb, Stde: *stde, Operator: *operator, Reason: *reason})
						})
					}
				},
			},
			{
				name:     "rqrd",
				synopsis: "--type RTYP --operator O --reason R",
				summary:  "ask the AODB for one reference data type (answered by <RTYP> RESP); expires the open request of the same type",
				setup: func(fs *pflag.FlagSet) runFunc {
					rtyp := fs.String("type", "", "reference type: SLST GLST BLST CLST TLST ABDG CHLT PLST AIRC REGN AIRL ARPT CITY COUL REGL ABNR DLYL HLTR ORGN STTS FLTL VIPL VIPS (required)")
					operator, reason := auditFlags(fs)
					return func(ctx context.Context, a *app, args []string) error {
						if err := exactArgs(args); err != nil {
							return err
						}
						if err := requireFlags(map[string]string{"--type": *rtyp, "--operator": *operator, "--reason": *reason}); err != nil {
							return err
						}
						return a.requestSend(ctx, func(cl controlv1.RequestServiceClient, cctx context.Context) (*controlv1.SendRequestResponse, error) {
							return cl.SendRQRD(cctx, &controlv1.SendRQRDRequest{Rtyp: *rtyp, Operator: *operator, Reason: *reason})
						})
					}
				},
			},
			{
				name:     "list",
				synopsis: "[--state S] [--limit N]",
				summary:  "outbound requests, newest first",
				setup: func(fs *pflag.FlagSet) runFunc {
					state := fs.String("state", "", "only requests in this state: registered, sent, waiting, done or expired")
					limit := fs.Int("limit", 100, "maximum requests (the server caps it at 1000)")
					return func(ctx context.Context, a *app, args []string) error {
						if err := exactArgs(args); err != nil {
							return err
						}
						if *limit <= 0 {
							return usagef("--limit %d: must be positive", *limit)
						}
						req := &controlv1.ListRequestsRequest{Limit: int32(min(*limit, 1<<30))}
						if *state != "" {
							v, ok := controlv1.RequestState_value["REQUEST_STATE_"+strings.ToUpper(*state)]
							if !ok || v == 0 {
								return usagef("--state %q: want registered, sent, waiting, done or expired", *state)
							}
							req.State = controlv1.RequestState(v)
						}
						return a.requestList(ctx, req)
					}
				},
			},
		},
	}
}

// auditFlags registers --operator and --reason, recorded with a request.
func auditFlags(fs *pflag.FlagSet) (operator, reason *string) {
	return fs.String("operator", "", "who asks, recorded with the request (required)"),
		fs.String("reason", "", "why, recorded with the request (required)")
}

// requireFlags reports every empty required flag at once, in name order.
func requireFlags(flags map[string]string) error {
	var missing []string
	for name, v := range flags {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return usagef("missing %s", strings.Join(missing, ", "))
}

func (a *app) requestSend(ctx context.Context, call func(controlv1.RequestServiceClient, context.Context) (*controlv1.SendRequestResponse, error)) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := call(controlv1.NewRequestServiceClient(conn), cctx)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	r := resp.GetRequest()
	tw := newTable(a.stdout)
	row(tw, "id", r.GetId())
	row(tw, "type", enumName(r.GetType(), "REQUEST_TYPE_"))
	row(tw, "scope", scopeOf(r))
	row(tw, "sender", r.GetSender())
	row(tw, "seqn", r.GetSeqn())
	row(tw, "state", enumName(r.GetState(), "REQUEST_STATE_"))
	row(tw, "operator", cell(r.GetOperator(), 80))
	row(tw, "reason", cell(r.GetReason(), 80))
	row(tw, "registered_at", a.ts(r.GetRegisteredAt()))
	row(tw, "superseded", int64Str(resp.GetSupersededId()))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "\nxml:\n%s\n", r.GetXml())
	return err
}

func (a *app) requestList(ctx context.Context, req *controlv1.ListRequestsRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewRequestServiceClient(conn).ListRequests(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	if len(resp.GetRequests()) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no requests match")
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "ID", "TYPE", "SCOPE", "SEQN", "STATE", "OUTBOUND_ID", "REGISTERED_AT", "SENT_AT", "TIMEOUT_AT", "CLOSED_AT", "RESPONSE", "MATCH", "OPERATOR", "CLOSED_REASON")
	for _, r := range resp.GetRequests() {
		row(tw, r.GetId(), enumName(r.GetType(), "REQUEST_TYPE_"), cell(scopeOf(r), 40), r.GetSeqn(),
			enumName(r.GetState(), "REQUEST_STATE_"), int64Str(r.GetOutboundId()),
			a.ts(r.GetRegisteredAt()), a.ts(r.GetSentAt()), a.ts(r.GetTimeoutAt()), a.ts(r.GetClosedAt()),
			int64Str(r.GetResponseMsgId()), strings.ToLower(enumName(r.GetMatchKind(), "MATCH_KIND_")),
			cell(r.GetOperator(), 20), cell(r.GetClosedReason(), closedReasonWidth))
	}
	return tw.Flush()
}

// scopeOf is what one request asks for: the window of an RQFD, the type of
// an RQRD.
func scopeOf(r *controlv1.OutboundRequest) string {
	if r.GetType() == controlv1.RequestType_REQUEST_TYPE_RQFD {
		return r.GetStdb() + ".." + r.GetStde()
	}
	return r.GetRtyp()
}
