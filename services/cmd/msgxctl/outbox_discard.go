package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// outboxDiscardCommand is "outbox discard": end DEAD rows nobody needs
// delivered any more (DISCARDED), audited with operator and reason. It is
// the only way a dead-letter row leaves the queue without a delivery.
func outboxDiscardCommand() *command {
	return &command{
		name:     "discard",
		synopsis: "(--id N ... | --target T) --operator NAME --reason TEXT",
		summary:  "end DEAD outbox rows nobody needs (DISCARDED, never delivered; a discarded marker finishes its backfill); audited",
		setup: func(fs *flag.FlagSet) runFunc {
			var ids []int64
			fs.Func("id", "DEAD outbox row `ID` to discard; repeat the flag for several rows (exclusive with --target)", func(s string) error {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil || v <= 0 {
					return fmt.Errorf("want a positive outbox ID, got %q", s)
				}
				ids = append(ids, v)
				return nil
			})
			target := fs.String("target", "", "discard every DEAD row of this target (flight-state, msg, schd, mailbox, coutmsgs)")
			operator := fs.String("operator", "", "who discards the rows (required; recorded in the audit)")
			reason := fs.String("reason", "", "why (required; recorded in the audit)")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				switch {
				case len(ids) == 0 && *target == "":
					return usagef("give --id N (repeatable) or --target T")
				case len(ids) > 0 && *target != "":
					return usagef("give --id or --target, not both")
				case strings.TrimSpace(*operator) == "":
					return usagef("--operator is required (the discard is audited)")
				case strings.TrimSpace(*reason) == "":
					return usagef("--reason is required (the discard is audited)")
				}
				return a.outboxDiscard(ctx, &controlv1.DiscardOutboxRequest{Ids: ids, Target: *target, Operator: *operator, Reason: *reason})
			}
		},
	}
}

func (a *app) outboxDiscard(ctx context.Context, req *controlv1.DiscardOutboxRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).DiscardOutbox(cctx, req)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(resp)
	}
	fmt.Fprintf(a.stdout, "discarded %d outbox row(s) (audit %d)\n", resp.GetDiscarded(), resp.GetAuditId())
	if len(resp.GetDiscardedIds()) > 0 {
		fmt.Fprintf(a.stdout, "discarded: %s\n", joinIDs(resp.GetDiscardedIds()))
	}
	if len(resp.GetSkippedIds()) > 0 {
		_, err = fmt.Fprintf(a.stdout, "skipped (missing, or not DEAD): %s\n", joinIDs(resp.GetSkippedIds()))
	}
	return err
}
