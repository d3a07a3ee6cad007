package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// messageDeadCommand is "message dead": the operators' escape hatch that
// ends an unfinished message — a stuck FIFO head included — as DEAD with
// the operator's name and reason (R-H3).
func messageDeadCommand() *command {
	return &command{
		name:     "dead",
		synopsis: "ID --operator NAME --reason TEXT",
		summary:  "end an unfinished message (PENDING, FAILED, APPLIED; e.g. a stuck head) as DEAD(OPERATOR); audited, then backfilled like any DEAD message",
		setup: func(fs *pflag.FlagSet) runFunc {
			operator := fs.String("operator", "", "who ends the message (required; recorded in the audit and the message's reason)")
			reason := fs.String("reason", "", "why (required; recorded in the audit and the message's reason)")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args, "ID"); err != nil {
					return err
				}
				id, err := positiveID("mailbox ID", args[0])
				if err != nil {
					return err
				}
				switch {
				case strings.TrimSpace(*operator) == "":
					return usagef("--operator is required (ending a message is audited)")
				case strings.TrimSpace(*reason) == "":
					return usagef("--reason is required (ending a message is audited)")
				}
				return a.messageDead(ctx, &controlv1.EndMessageRequest{MsgId: id, Operator: *operator, Reason: *reason})
			}
		},
	}
}

func (a *app) messageDead(ctx context.Context, req *controlv1.EndMessageRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).EndMessage(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	m, au := resp.GetMessage(), resp.GetAudit()
	was := enumName(au.GetPreviousState(), "MESSAGE_STATE_")
	if c := enumName(au.GetPreviousClass(), "ERROR_CLASS_"); c != "-" {
		was += " " + c
	}
	tw := newTable(a.stdout)
	row(tw, "msg_id", m.GetMsgId())
	row(tw, "state", enumName(m.GetState(), "MESSAGE_STATE_"))
	row(tw, "error_class", enumName(m.GetErrorClass(), "ERROR_CLASS_"))
	row(tw, "reason", cell(m.GetReason(), 200))
	row(tw, "was", was)
	row(tw, "attempts", m.GetAttempts())
	row(tw, "finished_at", a.ts(m.GetFinishedAt()))
	row(tw, "audit_id", au.GetId())
	row(tw, "backfill_outbox_id", au.GetBackfillOutboxId())
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "\nthe processor moves on to the next message; the dispatcher writes the mailbox marker "+
		"(backfilled_at in: msgxctl message get %d)\n", m.GetMsgId())
	return err
}
