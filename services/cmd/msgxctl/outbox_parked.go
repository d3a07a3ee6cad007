package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// outboxParkedCommand is "outbox parked": the keys (FLIDs) whose events
// wait behind a dead-lettered row on an event topic (R-L3).
func outboxParkedCommand() *command {
	return &command{
		name:     "parked",
		synopsis: "[--target T] [--limit N] [--after ID]",
		summary:  "parked keys: dead-lettered events whose FLID's later events wait behind them until requeued or discarded",
		setup: func(fs *pflag.FlagSet) runFunc {
			target := fs.String("target", "", "only this target (flight-state, msg, projection-control)")
			limit := fs.Int("limit", 100, "maximum rows (the server caps it at 1000)")
			after := fs.Int64("after", 0, "only dead rows with a larger ID (the next page starts after the last ID shown)")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				if *limit <= 0 {
					return usagef("--limit %d: must be positive", *limit)
				}
				return a.outboxParked(ctx, &controlv1.ListParkedKeysRequest{
					Target: *target, Limit: int32(min(*limit, 1<<30)), AfterId: *after,
				})
			}
		},
	}
}

func (a *app) outboxParked(ctx context.Context, req *controlv1.ListParkedKeysRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).ListParkedKeys(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	if len(resp.GetEntries()) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no parked keys")
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "DEAD_ID", "TARGET", "KEY", "MSG_ID", "CREATED_AT", "WAITING", "LAST_ERROR")
	for _, e := range resp.GetEntries() {
		row(tw, e.GetDeadId(), e.GetTarget(), e.GetKey(), int64Str(e.GetMsgId()), a.ts(e.GetCreatedAt()),
			e.GetWaiting(), cell(e.GetLastError(), lastErrorWidth))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next := resp.GetNextAfterId(); next != 0 {
		_, err = fmt.Fprintf(a.stdout, "\nmore rows: repeat with --after %d\n", next)
	}
	return err
}
