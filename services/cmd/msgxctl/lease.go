package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// leaseCommand is the "lease" group: the single-active leases (R-B8, R-F1
// "Lease").
func leaseCommand() *command {
	return &command{
		name: "lease",
		subs: []*command{
			{
				name:    "list",
				summary: "every lease: holder, expiry, time remaining and the fencing token of ended terms (a live term's token goes only to its holder)",
				setup: func(*pflag.FlagSet) runFunc {
					return func(ctx context.Context, a *app, args []string) error {
						if err := exactArgs(args); err != nil {
							return err
						}
						return a.leaseList(ctx)
					}
				},
			},
			{
				name:     "force-release",
				synopsis: "NAME --operator O --reason R",
				summary:  "end a lease's term now, whoever holds it (audited); the holder stops at its next renewal or fenced write and the next acquirer gets a new token",
				setup: func(fs *pflag.FlagSet) runFunc {
					operator := fs.String("operator", "", "who force-releases, recorded in the lease audit (required)")
					reason := fs.String("reason", "", "why, recorded in the lease audit (required)")
					return func(ctx context.Context, a *app, args []string) error {
						if err := exactArgs(args, "NAME"); err != nil {
							return err
						}
						var missing []string
						if strings.TrimSpace(*operator) == "" {
							missing = append(missing, "--operator")
						}
						if strings.TrimSpace(*reason) == "" {
							missing = append(missing, "--reason")
						}
						if len(missing) > 0 {
							return usagef("missing %s", strings.Join(missing, ", "))
						}
						return a.leaseForceRelease(ctx, &controlv1.ForceReleaseLeaseRequest{Name: args[0], Operator: *operator, Reason: *reason})
					}
				},
			},
		},
	}
}

func (a *app) leaseList(ctx context.Context) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewLeaseServiceClient(conn).List(cctx, &controlv1.ListLeasesRequest{})
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	if len(resp.GetLeases()) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no leases: no instance has acquired one yet")
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "NAME", "STATE", "HOLDER", "TOKEN", "EXPIRES_AT", "REMAINING", "ACQUIRED_AT", "RENEWED_AT")
	for _, l := range resp.GetLeases() {
		row(tw, l.GetName(), leaseState(l), l.GetHolder(), leaseToken(l), a.ts(l.GetExpiresAt()),
			l.GetRemaining().AsDuration().Truncate(100*time.Millisecond), a.ts(l.GetAcquiredAt()), a.ts(l.GetRenewedAt()))
	}
	return tw.Flush()
}

// leaseToken is the listed token, or "-" for a live term whose token the
// control plane gives only to its holder (R-H9).
func leaseToken(l *controlv1.Lease) any {
	if l.GetToken() == 0 {
		return "-"
	}
	return l.GetToken()
}

// leaseState is "held", "released" (by the holder or an operator) or
// "expired".
func leaseState(l *controlv1.Lease) string {
	switch {
	case l.GetHeld():
		return "held"
	case l.GetReleasedAt() != nil:
		return "released"
	default:
		return "expired"
	}
}

func (a *app) leaseForceRelease(ctx context.Context, req *controlv1.ForceReleaseLeaseRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewLeaseServiceClient(conn).ForceRelease(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	au := resp.GetAudit()
	if resp.GetWasHeld() {
		_, err = fmt.Fprintf(a.stdout, "lease %s force-released: term of %s (token %d) ended; the next acquirer gets a new token (audit %d)\n",
			req.GetName(), au.GetHolder(), au.GetToken(), au.GetId())
	} else {
		_, err = fmt.Fprintf(a.stdout, "lease %s was not held (last holder %s, token %d); recorded anyway (audit %d)\n",
			req.GetName(), au.GetHolder(), au.GetToken(), au.GetId())
	}
	return err
}
