package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// flightCommand is the "flight" group: authoritative flight state, a
// flight's trail (flight_trail.go) and its archived versions
// (flight_archived.go).
func flightCommand() *command {
	return &command{
		name: "flight",
		subs: []*command{{
			name:     "get",
			synopsis: "FLID",
			summary:  "authoritative state of one flight, with its full document",
			setup: func(*pflag.FlagSet) runFunc {
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args, "FLID"); err != nil {
						return err
					}
					flid, err := positiveID("FLID", args[0])
					if err != nil {
						return err
					}
					return a.flightGet(ctx, flid)
				}
			},
		}, flightTrailCommand(), flightArchivedCommand()},
	}
}

func (a *app) flightGet(ctx context.Context, flid int64) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).GetFlight(cctx, &controlv1.GetFlightRequest{Flid: flid})
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	f := resp.GetFlight()
	tw := newTable(a.stdout)
	row(tw, "flid", f.GetFlid())
	row(tw, "state", enumName(f.GetState(), "FLIGHT_STATE_"))
	row(tw, "state_version", f.GetStateVersion())
	row(tw, "operation_day", orDash(f.GetOperationDay()))
	row(tw, "master_flid", int64Str(f.GetMasterFlid()))
	row(tw, "last_msg_id", f.GetLastMsgId())
	row(tw, "created_at", a.ts(f.GetCreatedAt()))
	row(tw, "updated_at", a.ts(f.GetUpdatedAt()))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "\ndoc:\n%s\n", indentJSON(f.GetDocJson()))
	return err
}
