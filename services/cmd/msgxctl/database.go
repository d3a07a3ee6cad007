package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// databaseCommand is the "database" group: PostgreSQL's migration state,
// invalid indexes and long transactions (R-N9).
func databaseCommand() *command {
	return &command{
		name: "database",
		subs: []*command{{
			name:     "status",
			synopsis: "[--older-than D]",
			summary:  "schema version and applied migrations, indexes left invalid by a failed CONCURRENTLY build, transactions open longer than --older-than",
			setup: func(fs *pflag.FlagSet) runFunc {
				older := fs.Duration("older-than", time.Minute, "list transactions open longer than this (whole seconds)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					if *older < time.Second || *older > 24*time.Hour {
						return usagef("--older-than %v: want 1s to 24h", *older)
					}
					req := &controlv1.GetDatabaseStatusRequest{TransactionAgeSeconds: int32(*older / time.Second)}
					resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.GetDatabaseStatusResponse, error) {
						return controlv1.NewInspectServiceClient(c).GetDatabaseStatus(ctx, req)
					})
					if err != nil || printed {
						return err
					}
					return a.databaseStatus(resp, *older)
				}
			},
		}},
	}
}

func (a *app) databaseStatus(resp *controlv1.GetDatabaseStatusResponse, older time.Duration) error {
	ms := resp.GetMigrations()
	fmt.Fprintf(a.stdout, "schema version %d (%d migrations applied", resp.GetSchemaVersion(), len(ms))
	if len(ms) > 0 {
		fmt.Fprintf(a.stdout, ", the last at %s", a.ts(ms[len(ms)-1].GetAppliedAt()))
	}
	fmt.Fprintln(a.stdout, ")")
	tw := newTable(a.stdout)
	row(tw, "VERSION", "APPLIED_AT")
	for _, m := range ms {
		row(tw, fmt.Sprintf("%05d", m.GetVersion()), a.ts(m.GetAppliedAt()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(resp.GetInvalidIndexes()) == 0 {
		fmt.Fprintln(a.stdout, "\ninvalid indexes: none")
	} else {
		fmt.Fprintln(a.stdout, "\ninvalid indexes (a failed CONCURRENTLY build; the migration's runbook line says how to rebuild):")
		for _, ix := range resp.GetInvalidIndexes() {
			fmt.Fprintf(a.stdout, "  %s\n", ix)
		}
	}
	if len(resp.GetLongTransactions()) == 0 {
		_, err := fmt.Fprintf(a.stdout, "\ntransactions open longer than %v: none\n", older)
		return err
	}
	fmt.Fprintf(a.stdout, "\ntransactions open longer than %v:\n", older)
	tw = newTable(a.stdout)
	row(tw, "PID", "USER", "APPLICATION", "STATE", "SINCE", "WAITING", "QUERY")
	for _, l := range resp.GetLongTransactions() {
		row(tw, l.GetPid(), orDash(l.GetUser()), orDash(l.GetApplication()), orDash(l.GetState()), a.ts(l.GetTransactionStart()),
			orDash(l.GetWaitEvent()), cell(l.GetQuery(), 80))
	}
	return tw.Flush()
}
