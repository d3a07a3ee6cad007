package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// messageListCommand is "message list": processing records by state, error
// class and time, without a replay preview (R-H3).
func messageListCommand() *command {
	return &command{
		name:     "list",
		synopsis: "[--state S[,S]] [--class C[,C]] [--from T] [--to T] [--limit N] [--after ID]",
		summary:  "mailbox messages by state, error class and receive time, in ID order (e.g. --state pending: the head and what waits behind it)",
		setup: func(fs *pflag.FlagSet) runFunc {
			states := fs.String("state", "", "states, comma-separated: pending, failed, applied, succeeded, skipped, dead (default every state)")
			classes := fs.String("class", "", "error classes, comma-separated: malformed, codec_error, unsupported, infra, protocol, exhausted, operator, or none for no class (default any)")
			from := fs.String("from", "", "only messages received at or after this time (RFC 3339; registered_at where the mailbox gave no time)")
			to := fs.String("to", "", "only messages received before this time (RFC 3339, exclusive)")
			limit := fs.Int("limit", 100, "maximum messages (the server caps it at 1000)")
			after := fs.Int64("after", 0, "only messages with a larger mailbox ID (the next page starts after the last ID shown)")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				if *limit <= 0 {
					return usagef("--limit %d: must be positive", *limit)
				}
				if *after < 0 {
					return usagef("--after %d: must not be negative", *after)
				}
				req := &controlv1.ListMessagesRequest{Limit: int32(min(*limit, 1<<30)), AfterMsgId: *after}
				for _, s := range splitList(*states) {
					v, ok := controlv1.MessageState_value["MESSAGE_STATE_"+strings.ToUpper(s)]
					if !ok || v == 0 {
						return usagef("--state %q: want pending, failed, applied, succeeded, skipped or dead", s)
					}
					req.States = append(req.States, controlv1.MessageState(v))
				}
				for _, c := range splitList(*classes) {
					if strings.EqualFold(c, "none") {
						req.ErrorClasses = append(req.ErrorClasses, controlv1.ErrorClass_ERROR_CLASS_UNSPECIFIED)
						continue
					}
					v, ok := controlv1.ErrorClass_value["ERROR_CLASS_"+strings.ToUpper(c)]
					if !ok || v == 0 {
						return usagef("--class %q: want malformed, codec_error, unsupported, infra, protocol, exhausted, operator or none", c)
					}
					req.ErrorClasses = append(req.ErrorClasses, controlv1.ErrorClass(v))
				}
				var err error
				if req.From, err = optionalRFC3339("--from", *from); err != nil {
					return err
				}
				if req.To, err = optionalRFC3339("--to", *to); err != nil {
					return err
				}
				return a.messageList(ctx, req)
			}
		},
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// optionalRFC3339 parses an optional time flag; "" is absent.
func optionalRFC3339(name, v string) (*timestamppb.Timestamp, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, usagef("%s %q: want RFC 3339, e.g. 2026-03-01T00:00:00+08:00", name, v)
	}
	return timestamppb.New(t), nil
}

func (a *app) messageList(ctx context.Context, req *controlv1.ListMessagesRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).ListMessages(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	if len(resp.GetMessages()) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no messages match")
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "MSG_ID", "STATE", "CLASS", "TYPE", "STYP", "ATTEMPTS", "RECEIVED_AT", "UPDATED_AT", "REASON")
	for _, m := range resp.GetMessages() {
		row(tw, m.GetMsgId(), enumName(m.GetState(), "MESSAGE_STATE_"), enumName(m.GetErrorClass(), "ERROR_CLASS_"),
			orDash(m.GetType()), orDash(m.GetStyp()), m.GetAttempts(), a.ts(m.GetReceivedAt()), a.ts(m.GetUpdatedAt()),
			cell(m.GetReason(), lastErrorWidth))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next := resp.GetNextAfterMsgId(); next != 0 {
		_, err = fmt.Fprintf(a.stdout, "\nmore messages: repeat with --after %d\n", next)
	}
	return err
}
