package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// lastErrorWidth bounds the last_error column; -json shows it in full.
const lastErrorWidth = 80

// outboxCommand is the "outbox" group: delivery rows and the DLQ, and
// re-queueing it (outbox_requeue.go).
func outboxCommand() *command {
	return &command{
		name: "outbox",
		subs: []*command{{
			name:     "list",
			synopsis: "[--target T] [--state S] [--limit N] [--after ID]",
			summary:  "outbox rows in ID order without payloads; --state dead is the dead-letter queue",
			setup: func(fs *pflag.FlagSet) runFunc {
				target := fs.String("target", "", "only rows of this target (flight-state, msg, schd, mailbox, coutmsgs)")
				state := fs.String("state", "", "only rows in this state: pending, sent, dead, abandoned or discarded")
				limit := fs.Int("limit", 100, "maximum rows (the server caps it at 1000)")
				after := fs.Int64("after", 0, "only rows with a larger ID (the next page starts after the last ID shown)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					req := &controlv1.ListOutboxRequest{Target: *target, AfterId: *after}
					if *limit <= 0 {
						return usagef("--limit %d: must be positive", *limit)
					}
					req.Limit = int32(min(*limit, 1<<30))
					if *state != "" {
						v, ok := controlv1.OutboxState_value["OUTBOX_STATE_"+strings.ToUpper(*state)]
						if !ok || v == 0 {
							return usagef("--state %q: want pending, sent, dead, abandoned or discarded", *state)
						}
						req.State = controlv1.OutboxState(v)
					}
					return a.outboxList(ctx, req)
				}
			},
		}, outboxRequeueCommand(), outboxResendCommand(), outboxDiscardCommand(), outboxParkedCommand()},
	}
}

func (a *app) outboxList(ctx context.Context, req *controlv1.ListOutboxRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).ListOutbox(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	if len(resp.GetEntries()) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no outbox rows match")
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "ID", "TARGET", "PKEY", "MSG_ID", "STATE", "ATTEMPTS", "NEXT_ATTEMPT_AT", "CREATED_AT", "SENT_AT", "OUTCOME", "LAST_ERROR")
	for _, e := range resp.GetEntries() {
		row(tw, e.GetId(), e.GetTarget(), cell(e.GetPkey(), 40), int64Str(e.GetMsgId()),
			enumName(e.GetState(), "OUTBOX_STATE_"), e.GetAttempts(),
			a.ts(e.GetNextAttemptAt()), a.ts(e.GetCreatedAt()), a.ts(e.GetSentAt()),
			cell(e.GetOutcome(), 40), cell(e.GetLastError(), lastErrorWidth))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next := resp.GetNextAfterId(); next != 0 {
		_, err = fmt.Fprintf(a.stdout, "\nmore rows: repeat with --after %d\n", next)
	}
	return err
}
