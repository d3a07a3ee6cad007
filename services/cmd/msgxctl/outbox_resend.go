package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// outboxResendCommand is "outbox resend": send again what a Kafka target
// delivered in a time window, after the broker lost records it had
// acknowledged (docs/runbook.md "The broker lost acknowledged records").
// It repeats the call while the server reports more, over one window: the
// rows a call moved are sent again after the window's end and are not
// picked a second time.
func outboxResendCommand() *command {
	return &command{
		name:     "resend",
		synopsis: "--target T --since TIME [--until TIME] [--dry-run] --operator NAME --reason TEXT",
		summary:  "send again the rows a Kafka target delivered in a time window (the broker lost them); audited",
		setup: func(fs *pflag.FlagSet) runFunc {
			target := fs.String("target", "", "the Kafka target: flight-state, msg, schd or projection-control (required)")
			since := fs.String("since", "", "the window's start, RFC 3339: the earliest time the broker may have lost records from, with a margin (required)")
			until := fs.String("until", "", "the window's end, RFC 3339 (default: now)")
			operator := fs.String("operator", "", "who asks for the re-send (required; recorded in the audit)")
			reason := fs.String("reason", "", "why (required; recorded in the audit)")
			dryRun := fs.Bool("dry-run", false, "count the window's rows; move and record nothing")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				req := &controlv1.ResendOutboxRequest{Target: *target, Operator: *operator, Reason: *reason, DryRun: *dryRun}
				var err error
				switch {
				case strings.TrimSpace(*target) == "":
					return usagef("--target is required (flight-state, msg, schd or projection-control)")
				case *since == "":
					return usagef("--since is required")
				case strings.TrimSpace(*operator) == "":
					return usagef("--operator is required (the re-send is audited)")
				case strings.TrimSpace(*reason) == "":
					return usagef("--reason is required (the re-send is audited)")
				}
				if req.SentSince, err = optionalRFC3339("--since", *since); err != nil {
					return err
				}
				if req.SentUntil, err = optionalRFC3339("--until", *until); err != nil {
					return err
				}
				return a.outboxResend(ctx, req)
			}
		},
	}
}

func (a *app) outboxResend(ctx context.Context, req *controlv1.ResendOutboxRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	client := controlv1.NewAdminServiceClient(conn)
	if req.GetDryRun() {
		cctx, cancel := a.callCtx(ctx)
		defer cancel()
		resp, err := client.ResendOutbox(cctx, req)
		if err != nil {
			return err
		}
		if a.structured() {
			return a.printStructured(resp)
		}
		_, err = fmt.Fprintf(a.stdout, "would re-send %d %s row(s) sent from %s until %s\n",
			resp.GetMatched(), req.GetTarget(), a.ts(req.GetSentSince()), a.ts(resp.GetSentUntil()))
		return err
	}
	var calls []*controlv1.ResendOutboxResponse
	for {
		cctx, cancel := a.callCtx(ctx)
		resp, err := client.ResendOutbox(cctx, req)
		cancel()
		if err != nil {
			if len(calls) > 0 {
				return fmt.Errorf("after %d call(s) that re-sent rows (audits %s): %w", len(calls), auditIDs(calls), err)
			}
			return err
		}
		calls = append(calls, resp)
		if !resp.GetMore() {
			break
		}
		req.SentUntil = resp.GetSentUntil() // the same window: what moved is sent after it
	}
	if a.structured() {
		for _, resp := range calls {
			if err := a.printStructured(resp); err != nil {
				return err
			}
		}
		return nil
	}
	var total int64
	for _, resp := range calls {
		total += resp.GetResent()
	}
	last := calls[len(calls)-1]
	_, err = fmt.Fprintf(a.stdout, "re-sending %d %s row(s) sent from %s until %s (audit %s)\n",
		total, req.GetTarget(), a.ts(req.GetSentSince()), a.ts(last.GetSentUntil()), auditIDs(calls))
	return err
}

// auditIDs lists the audit IDs of a command's calls.
func auditIDs(calls []*controlv1.ResendOutboxResponse) string {
	ids := make([]int64, len(calls))
	for i, c := range calls {
		ids[i] = c.GetAuditId()
	}
	return joinIDs(ids)
}
