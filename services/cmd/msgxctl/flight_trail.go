package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// flightTrailCommand is "flight trail": every change of a flight with the
// message that caused it (R-N9).
func flightTrailCommand() *command {
	return &command{
		name:     "trail",
		synopsis: "FLID [--limit N] [--before OUTBOX_ID]",
		summary:  "a flight's changes, newest first: message, its outcome, changed keys, version, time, delivery; and its archived versions",
		setup: func(fs *pflag.FlagSet) runFunc {
			limit := fs.Int("limit", 50, "maximum changes (the server caps it at 500)")
			before := fs.Int64("before", 0, "only changes older than this outbox ID (the next page starts before the last ID shown)")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args, "FLID"); err != nil {
					return err
				}
				flid, err := positiveID("FLID", args[0])
				if err != nil {
					return err
				}
				if *limit <= 0 {
					return usagef("--limit %d: must be positive", *limit)
				}
				if *before < 0 {
					return usagef("--before %d: must not be negative", *before)
				}
				return a.flightTrail(ctx, &controlv1.GetFlightTrailRequest{Flid: flid, Limit: int32(min(*limit, 1<<30)), BeforeOutboxId: *before})
			}
		},
	}
}

func (a *app) flightTrail(ctx context.Context, req *controlv1.GetFlightTrailRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewInspectServiceClient(conn).GetFlightTrail(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	if c := resp.GetCurrent(); c != nil {
		fmt.Fprintf(a.stdout, "flight %d: %s, version %d, last message %d, updated %s\n\n",
			c.GetFlid(), enumName(c.GetState(), "FLIGHT_STATE_"), c.GetStateVersion(), c.GetLastMsgId(), a.ts(c.GetUpdatedAt()))
	} else {
		fmt.Fprintf(a.stdout, "flight %d: no current row (archived, or never stored)\n\n", resp.GetFlid())
	}
	if len(resp.GetEntries()) == 0 {
		fmt.Fprintln(a.stdout, "no changes in the outbox (older ones are cleaned up after the record retention)")
	} else {
		tw := newTable(a.stdout)
		row(tw, "OUTBOX_ID", "VERSION", "EVENT", "MSG_ID", "MESSAGE", "OUTCOME", "CHANGED", "OCCURRED_AT", "DELIVERY")
		for _, e := range resp.GetEntries() {
			msg := strings.Trim(strings.Join([]string{e.GetSender(), e.GetMsgType(), e.GetMsgSubtype(), e.GetSeqn()}, " "), " ")
			if e.GetReason() != "" {
				msg = strings.TrimSpace(msg + " (" + e.GetReason() + ")")
			}
			row(tw, e.GetOutboxId(), e.GetStateVersion(), orDash(e.GetEventType()), int64Str(e.GetMsgId()), cell(msg, 40),
				enumName(e.GetMessageState(), "MESSAGE_STATE_"), cell(strings.Join(e.GetChanged(), ","), 60),
				a.ts(e.GetOccurredAt()), enumName(e.GetDelivery(), "OUTBOX_STATE_"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if n := resp.GetNextBeforeOutboxId(); n != 0 {
			fmt.Fprintf(a.stdout, "\nmore changes: repeat with --before %d\n", n)
		}
	}
	if len(resp.GetArchived()) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout, "\narchived versions:")
	tw := newTable(a.stdout)
	row(tw, "VERSION", "STATE", "OPERATION_DAY", "LAST_MSG_ID", "UPDATED_AT", "ARCHIVED_AT")
	for _, v := range resp.GetArchived() {
		row(tw, v.GetStateVersion(), enumName(v.GetState(), "FLIGHT_STATE_"), orDash(v.GetOperationDay()),
			v.GetLastMsgId(), a.ts(v.GetUpdatedAt()), a.ts(v.GetArchivedAt()))
	}
	return tw.Flush()
}
