package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// backfillCommand is the "backfill" group: processed markers on the
// mailbox rows (R-D4).
func backfillCommand() *command {
	return &command{
		name: "backfill",
		subs: []*command{{
			name:     "abandoned",
			synopsis: "[--limit N] [--after ID]",
			summary:  "abandoned backfills: processed messages whose mailbox row was missing, so never marked",
			setup: func(fs *pflag.FlagSet) runFunc {
				limit := fs.Int("limit", 100, "maximum rows (the server caps it at 1000)")
				after := fs.Int64("after", 0, "only rows with a larger outbox ID (the next page starts after the last ID shown)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					if *limit <= 0 {
						return usagef("--limit %d: must be positive", *limit)
					}
					return a.backfillAbandoned(ctx, &controlv1.ListAbandonedBackfillsRequest{
						Limit: int32(min(*limit, 1<<30)), AfterId: *after,
					})
				}
			},
		}, backfillAcknowledgeCommand()},
	}
}

func (a *app) backfillAbandoned(ctx context.Context, req *controlv1.ListAbandonedBackfillsRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).ListAbandonedBackfills(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	if len(resp.GetEntries()) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no abandoned backfills")
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "ID", "MSG_ID", "CREATED_AT", "ABANDONED_AT", "ATTEMPTS", "OUTCOME", "LAST_ERROR")
	for _, e := range resp.GetEntries() {
		row(tw, e.GetId(), int64Str(e.GetMsgId()), a.ts(e.GetCreatedAt()), a.ts(e.GetAbandonedAt()),
			e.GetAttempts(), cell(e.GetOutcome(), 40), cell(e.GetLastError(), lastErrorWidth))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next := resp.GetNextAfterId(); next != 0 {
		_, err = fmt.Fprintf(a.stdout, "\nmore rows: repeat with --after %d\n", next)
	}
	return err
}
