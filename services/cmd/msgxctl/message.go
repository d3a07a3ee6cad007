package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// messageCommand is the "message" group: processing state of mailbox
// messages, listing them (message_list.go) and ending a stuck one
// (message_dead.go).
func messageCommand() *command {
	return &command{
		name: "message",
		subs: []*command{{
			name:     "get",
			synopsis: "ID [--raw]",
			summary:  "processing state of one mailbox message (its proc_state row)",
			setup: func(fs *pflag.FlagSet) runFunc {
				raw := fs.Bool("raw", false, "also print the raw XML as received")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args, "ID"); err != nil {
						return err
					}
					id, err := positiveID("mailbox ID", args[0])
					if err != nil {
						return err
					}
					return a.messageGet(ctx, id, *raw)
				}
			},
		}, messageListCommand(), messageDeadCommand()},
	}
}

func (a *app) messageGet(ctx context.Context, id int64, raw bool) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).GetMessage(cctx, &controlv1.GetMessageRequest{MsgId: id, IncludeRaw: raw})
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	m := resp.GetMessage()
	tw := newTable(a.stdout)
	row(tw, "msg_id", m.GetMsgId())
	row(tw, "state", enumName(m.GetState(), "MESSAGE_STATE_"))
	row(tw, "error_class", enumName(m.GetErrorClass(), "ERROR_CLASS_"))
	row(tw, "reason", orDash(m.GetReason()))
	row(tw, "attempts", m.GetAttempts())
	row(tw, "next_attempt_at", a.ts(m.GetNextAttemptAt()))
	row(tw, "processing_started_at", a.ts(m.GetProcessingStartedAt()))
	row(tw, "identity_key", orDash(m.GetIdentityKey()))
	row(tw, "sndr", orDash(m.GetSndr()))
	row(tw, "type", orDash(m.GetType()))
	row(tw, "styp", orDash(m.GetStyp()))
	row(tw, "seqn", orDash(m.GetSeqn()))
	row(tw, "dttm", orDash(m.GetDttm()))
	row(tw, "received_at", a.ts(m.GetReceivedAt()))
	row(tw, "registered_at", a.ts(m.GetRegisteredAt()))
	row(tw, "applied_at", a.ts(m.GetAppliedAt()))
	row(tw, "finished_at", a.ts(m.GetFinishedAt()))
	row(tw, "backfilled_at", a.ts(m.GetBackfilledAt()))
	row(tw, "backfill_outcome", orDash(m.GetBackfillOutcome()))
	row(tw, "updated_at", a.ts(m.GetUpdatedAt()))
	row(tw, "kafka_offset", m.GetKafkaOffset())
	if err := tw.Flush(); err != nil {
		return err
	}
	if raw {
		_, err = fmt.Fprintf(a.stdout, "\nraw:\n%s\n", m.GetRaw())
	}
	return err
}
