package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// backlogCommand is "backlog": the processing backlog.
func backlogCommand() *command {
	return &command{
		name:    "backlog",
		summary: "processing backlog: messages per state, oldest unfinished message and its age",
		setup: func(*pflag.FlagSet) runFunc {
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				return a.backlog(ctx)
			}
		},
	}
}

func (a *app) backlog(ctx context.Context) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).GetBacklog(cctx, &controlv1.GetBacklogRequest{})
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	c := resp.GetCounts()
	tw := newTable(a.stdout)
	row(tw, "STATE", "COUNT")
	row(tw, "PENDING", c.GetPending())
	row(tw, "FAILED", c.GetFailed())
	row(tw, "APPLIED", c.GetApplied())
	row(tw, "SUCCEEDED", c.GetSucceeded())
	row(tw, "SKIPPED", c.GetSkipped())
	row(tw, "DEAD", c.GetDead())
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	tw = newTable(a.stdout)
	row(tw, "unfinished", resp.GetUnfinished())
	if resp.GetOldestUnfinishedMsgId() != 0 {
		age := time.Duration(resp.GetOldestUnfinishedAgeSeconds() * float64(time.Second)).Round(time.Second)
		row(tw, "oldest unfinished", fmt.Sprintf("msg %d, waiting %v since %s",
			resp.GetOldestUnfinishedMsgId(), age, a.ts(resp.GetOldestUnfinishedSince())))
	} else {
		row(tw, "oldest unfinished", "-")
	}
	row(tw, "unmarked terminal", resp.GetUnmarkedTerminal())
	row(tw, "as of", a.ts(resp.GetAsOf()))
	return tw.Flush()
}
