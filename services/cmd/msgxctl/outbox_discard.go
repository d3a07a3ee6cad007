package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

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
		setup: func(fs *pflag.FlagSet) runFunc {
			sel := addRowSelection(fs, "discard",
				"DEAD outbox row `ID` to discard; repeat the flag for several rows (exclusive with --target)",
				"discard every DEAD row of this target (flight-state, msg, schd, mailbox, coutmsgs)",
				"who discards the rows (required; recorded in the audit)")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				if err := sel.check(); err != nil {
					return err
				}
				return a.outboxDiscard(ctx, &controlv1.DiscardOutboxRequest{Ids: sel.ids, Target: *sel.target, Operator: *sel.operator, Reason: *sel.reason})
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
	if a.structured() {
		return a.printStructured(resp)
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
