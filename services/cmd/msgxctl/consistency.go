package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// consistencyCommand is the "consistency" group: an on-demand check of
// what the pipeline recorded (R-N9).
func consistencyCommand() *command {
	return &command{
		name: "consistency",
		subs: []*command{{
			name:     "check",
			synopsis: "[--grace D] [--samples N]",
			summary:  "check now: stranded messages (what the self-check repairs), changes Redis has not acknowledged, undelivered and dead outbox rows, versions below the archive; exit status 1 when anything is found",
			setup: func(fs *pflag.FlagSet) runFunc {
				grace := fs.Duration("grace", time.Minute, "ignore states younger than this, which a live transaction may still be completing (whole seconds)")
				samples := fs.Int("samples", 10, "IDs listed per finding (the server caps it at 100)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					if *grace < time.Second || *grace > 24*time.Hour {
						return usagef("--grace %v: want 1s to 24h", *grace)
					}
					if *samples <= 0 {
						return usagef("--samples %d: must be positive", *samples)
					}
					req := &controlv1.CheckConsistencyRequest{GraceSeconds: int32(*grace / time.Second), Samples: int32(min(*samples, 1<<30))}
					resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.CheckConsistencyResponse, error) {
						return controlv1.NewInspectServiceClient(c).CheckConsistency(ctx, req)
					})
					if err != nil {
						return err
					}
					if !printed {
						tw := newTable(a.stdout)
						row(tw, "CHECK", "FOUND", "SAMPLE_IDS", "REMEDY")
						for _, f := range resp.GetFindings() {
							ids := make([]string, 0, len(f.GetSampleIds()))
							for _, id := range f.GetSampleIds() {
								ids = append(ids, fmt.Sprint(id))
							}
							row(tw, f.GetName(), f.GetCount(), cell(strings.Join(ids, ","), 60), orDash(remedyIfFound(f)))
						}
						if err := tw.Flush(); err != nil {
							return err
						}
						fmt.Fprintf(a.stdout, "\nchecked at %s (states younger than %v ignored); -o yaml explains each check\n", a.ts(resp.GetCheckedAt()), *grace)
					}
					if !resp.GetOk() {
						return errInconsistent
					}
					return nil
				}
			},
		}},
	}
}

// errInconsistent is the outcome of a check that found something: exit
// status 1, so a script or a probe can act on it.
var errInconsistent = fmt.Errorf("consistency check found inconsistencies (see the findings above)")

// remedyIfFound shows a finding's remedy only where it found something.
func remedyIfFound(f *controlv1.ConsistencyFinding) string {
	if f.GetCount() == 0 {
		return ""
	}
	return f.GetRemedy()
}
