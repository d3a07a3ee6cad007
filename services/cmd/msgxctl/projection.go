package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// projectionCommand is the "projection" group: rebuild the Redis
// projection from PostgreSQL (R-E4) and follow a rebuild.
func projectionCommand() *command {
	return &command{
		name: "projection",
		subs: []*command{
			{
				name:     "rebuild",
				synopsis: "--operator NAME --reason TEXT",
				summary:  "rebuild the whole Redis projection from PostgreSQL and remove stale keys (the projector completes it)",
				setup: func(fs *pflag.FlagSet) runFunc {
					operator := fs.String("operator", "", "who rebuilds (required; recorded)")
					reason := fs.String("reason", "", "why (required; recorded)")
					return func(ctx context.Context, a *app, args []string) error {
						if err := exactArgs(args); err != nil {
							return err
						}
						if strings.TrimSpace(*operator) == "" || strings.TrimSpace(*reason) == "" {
							return usagef("--operator and --reason are required: who rebuilds and why is recorded")
						}
						return a.projectionRebuild(ctx, &controlv1.RebuildProjectionRequest{Operator: *operator, Reason: *reason})
					}
				},
			},
			{
				name:     "status",
				synopsis: "GENERATION",
				summary:  "one projection rebuild: who asked, what it enqueued, how far the dispatcher delivered it",
				setup: func(*pflag.FlagSet) runFunc {
					return func(ctx context.Context, a *app, args []string) error {
						if err := exactArgs(args, "GENERATION"); err != nil {
							return err
						}
						gen, err := positiveID("rebuild generation", args[0])
						if err != nil {
							return err
						}
						return a.projectionStatus(ctx, gen)
					}
				},
			},
		},
	}
}

func (a *app) projectionRebuild(ctx context.Context, req *controlv1.RebuildProjectionRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).RebuildProjection(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	r := resp.GetRebuild()
	_, err = fmt.Fprintf(a.stdout, "projection rebuild %d enqueued: %d flight(s) (%d active, %d deleted), max msg_id %d\n"+
		"the projector completes it: look for generation=%d in its log or at msgx_projector_rebuilds_total; "+
		"'msgxctl projection status %d' shows the delivery\n",
		r.GetGeneration(), r.GetFlights(), r.GetActive(), r.GetDeleted(), r.GetMaxMsgId(), r.GetGeneration(), r.GetGeneration())
	return err
}

func (a *app) projectionStatus(ctx context.Context, generation int64) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).GetRebuild(cctx, &controlv1.GetRebuildRequest{Generation: generation})
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	r := resp.GetRebuild()
	d := r.GetDelivery()
	tw := newTable(a.stdout)
	row(tw, "generation", r.GetGeneration())
	row(tw, "operator", cell(r.GetOperator(), 80))
	row(tw, "reason", cell(r.GetReason(), 120))
	row(tw, "requested_at", a.ts(r.GetRequestedAt()))
	row(tw, "flights", fmt.Sprintf("%d (%d active, %d deleted)", r.GetFlights(), r.GetActive(), r.GetDeleted()))
	row(tw, "max_msg_id", r.GetMaxMsgId())
	row(tw, "records", fmt.Sprintf("%d pending, %d sent, %d dead, %d cleaned up", d.GetPending(), d.GetSent(), d.GetDead(), d.GetCleanedUp()))
	row(tw, "manifest", fmt.Sprintf("outbox %d, %s", r.GetManifestOutboxId(), enumName(d.GetManifestState(), "OUTBOX_STATE_")))
	return tw.Flush()
}
