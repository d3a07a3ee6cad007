package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// errNotServing fails "health" when the control plane answers but is not
// serving (PostgreSQL unreachable, or shutting down).
var errNotServing = errors.New("control plane is NOT_SERVING (PostgreSQL unreachable, or shutting down)")

// healthCommand is "health": the standard gRPC health check, no token
// needed.
func healthCommand() *command {
	return &command{
		name:     "health",
		synopsis: "[--service NAME]",
		summary:  "gRPC health status of the control plane; exit status 1 unless SERVING",
		setup: func(fs *pflag.FlagSet) runFunc {
			service := fs.String("service", "", `service to check, e.g. msgx.control.v1.AdminService ("" = the server as a whole)`)
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				return a.health(ctx, *service)
			}
		},
	}
}

func (a *app) health(ctx context.Context, service string) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return err
	}
	if a.structured() {
		err = a.printStructured(resp)
	} else {
		name := service
		if name == "" {
			name = "(server)"
		}
		tw := newTable(a.stdout)
		row(tw, "SERVICE", "STATUS")
		row(tw, name, resp.GetStatus())
		err = tw.Flush()
	}
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return errNotServing
	}
	return nil
}
