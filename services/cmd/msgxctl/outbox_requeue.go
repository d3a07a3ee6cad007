package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// outboxRequeueCommand is "outbox requeue": put dead-letter rows (or
// abandoned backfills) back to PENDING, audited with operator and reason.
func outboxRequeueCommand() *command {
	return &command{
		name:     "requeue",
		synopsis: "(--id N ... | --target T) [--state S] --operator NAME --reason TEXT",
		summary:  "put DEAD outbox rows (or, with --state abandoned, abandoned backfills) back to PENDING; audited",
		setup: func(fs *pflag.FlagSet) runFunc {
			sel := addRowSelection(fs, "re-queue",
				"outbox row `ID` to re-queue; repeat the flag for several rows (exclusive with --target)",
				"re-queue every row of this target in --state (flight-state, msg, schd, mailbox, coutmsgs)",
				"who asks for the re-queue (required; recorded in the audit)")
			state := fs.String("state", "dead", "state the rows must be in: dead (the dead-letter queue, including backfills that gave up) or abandoned")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				req := &controlv1.RequeueOutboxRequest{Ids: sel.ids, Target: *sel.target, Operator: *sel.operator, Reason: *sel.reason}
				switch strings.ToLower(*state) {
				case "dead":
					req.State = controlv1.OutboxState_OUTBOX_STATE_DEAD
				case "abandoned":
					req.State = controlv1.OutboxState_OUTBOX_STATE_ABANDONED
				default:
					return usagef("--state %q: want dead or abandoned", *state)
				}
				if err := sel.check(); err != nil {
					return err
				}
				return a.outboxRequeue(ctx, req)
			}
		},
	}
}

func (a *app) outboxRequeue(ctx context.Context, req *controlv1.RequeueOutboxRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).RequeueOutbox(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	fmt.Fprintf(a.stdout, "requeued %d outbox row(s) (audit %d)\n", resp.GetRequeued(), resp.GetAuditId())
	if len(resp.GetRequeuedIds()) > 0 {
		fmt.Fprintf(a.stdout, "requeued: %s\n", joinIDs(resp.GetRequeuedIds()))
	}
	if len(resp.GetSkippedIds()) > 0 {
		_, err = fmt.Fprintf(a.stdout, "skipped (missing, or not %s): %s\n",
			enumName(req.GetState(), "OUTBOX_STATE_"), joinIDs(resp.GetSkippedIds()))
	}
	return err
}

// joinIDs writes IDs as a comma-separated list.
func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}
