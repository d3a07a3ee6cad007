package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// auditKinds are the --kind values of "audit list".
const auditKinds = "requeue, discard, lease, replay, message-end, rebuild, request, maintenance, mailbox-census"

// auditCommand is the "audit" group: every audit table in one listing
// (R-N9).
func auditCommand() *command {
	return &command{
		name: "audit",
		subs: []*command{{
			name:     "list",
			synopsis: "[--kind K] [--operator NAME] [--since T|DURATION] [--limit N] [--page TOKEN]",
			summary:  "who did what, when and why, newest first: re-queues, discards, lease actions, replays, ended messages, rebuilds, outbound requests, maintenance requests, mailbox censuses",
			setup: func(fs *pflag.FlagSet) runFunc {
				kind := fs.String("kind", "", "only this kind: "+auditKinds+" (default every kind)")
				operator := fs.String("operator", "", "only rows of this operator (or lease holder)")
				since := fs.String("since", "", "only rows at or after this time: RFC 3339, or a duration back from now such as 24h")
				limit := fs.Int("limit", 100, "maximum rows (the server caps it at 1000)")
				page := fs.String("page", "", "continue a listing: the token the previous page printed")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					if *limit <= 0 {
						return usagef("--limit %d: must be positive", *limit)
					}
					req := &controlv1.ListAuditRequest{Operator: *operator, Limit: int32(min(*limit, 1<<30)), PageToken: *page}
					if *kind != "" {
						v, ok := controlv1.AuditKind_value["AUDIT_KIND_"+strings.ToUpper(strings.ReplaceAll(*kind, "-", "_"))]
						if !ok || v == 0 {
							return usagef("--kind %q: want one of %s", *kind, auditKinds)
						}
						req.Kind = controlv1.AuditKind(v)
					}
					if *since != "" {
						if d, err := time.ParseDuration(*since); err == nil && d > 0 {
							req.Since = timestamppb.New(time.Now().Add(-d))
						} else if req.Since, err = optionalRFC3339("--since", *since); err != nil {
							return usagef("--since %q: want RFC 3339 or a positive duration such as 24h", *since)
						}
					}
					return a.auditList(ctx, req)
				}
			},
		}},
	}
}

func (a *app) auditList(ctx context.Context, req *controlv1.ListAuditRequest) error {
	resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.ListAuditResponse, error) {
		return controlv1.NewInspectServiceClient(c).ListAudit(ctx, req)
	})
	if err != nil || printed {
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "AT", "KIND", "ACTION", "OPERATOR", "PRINCIPAL", "SUBJECT", "REASON", "DETAIL")
	for _, e := range resp.GetEntries() {
		kind := strings.ReplaceAll(strings.ToLower(enumName(e.GetKind(), "AUDIT_KIND_")), "_", "-")
		detail := e.GetDetailJson()
		if detail == "{}" {
			detail = ""
		}
		row(tw, a.ts(e.GetAt()), kind, cell(e.GetAction(), 30), cell(e.GetOperator(), 24), orDash(e.GetPrincipal()),
			cell(e.GetSubject(), 40), cell(e.GetReason(), 50), cell(detail, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	a.morePages("page", resp.GetNextPageToken(), "")
	return nil
}
