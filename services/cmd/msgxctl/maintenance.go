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

// maintenanceJobs are the JOB values of "maintenance run".
const maintenanceJobs = "daily, cleanup, history-sweep, history-purge, self-check"

// maintenancePoll is how often "maintenance run --wait" asks whether the
// processor finished the request.
const maintenancePoll = time.Second

// maintenanceCommand is the "maintenance" group: the processor's
// maintenance runs, and running a job now or its dry run (R-N9).
func maintenanceCommand() *command {
	return &command{
		name: "maintenance",
		subs: []*command{{
			name:     "runs",
			synopsis: "[--limit N] [--before ID]",
			summary:  "maintenance runs, newest first: the daily ones and the jobs operators ran, with what each deleted, archived, skipped or failed",
			setup: func(fs *pflag.FlagSet) runFunc {
				page := bindPage(fs, 50, 1000, "before", "only runs with a smaller ID (the next page starts before the last ID shown)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					limit, before, err := page.values()
					if err != nil {
						return err
					}
					resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.ListMaintenanceRunsResponse, error) {
						return controlv1.NewMaintenanceServiceClient(c).ListMaintenanceRuns(ctx, &controlv1.ListMaintenanceRunsRequest{Limit: limit, BeforeId: before})
					})
					if err != nil || printed {
						return err
					}
					tw := newTable(a.stdout)
					row(tw, "ID", "JOB", "REQUEST", "STARTED_AT", "FINISHED_AT", "RECORDS", "OUTBOX", "ARCHIVED", "SKIPPED", "FAILED", "TOMBSTONES", "ERROR")
					for _, r := range resp.GetRuns() {
						row(tw, r.GetId(), jobName(r.GetJob()), int64Str(r.GetRequestId()), a.ts(r.GetStartedAt()), a.ts(r.GetFinishedAt()),
							optCount(r.RecordsDeleted), optCount(r.OutboxDeleted), optCount(r.FlightsArchived), optCount(r.FlightsSkipped),
							optCount(r.FlightsFailed), optCount(r.Tombstones), cell(r.GetError(), 60))
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					a.morePages("before", resp.GetNextBeforeId(), int64(0))
					return nil
				}
			},
		}, {
			name:     "run",
			synopsis: "JOB [--dry-run] --operator NAME --reason TEXT [--wait]",
			summary:  "ask the processor to run one job now (" + maintenanceJobs + "), or with --dry-run to report what it would do without writing",
			setup: func(fs *pflag.FlagSet) runFunc {
				dryRun := fs.Bool("dry-run", false, "count what the job would do; write nothing")
				operator := fs.String("operator", "", "who runs it (required, recorded in the audit)")
				reason := fs.String("reason", "", "why (required, recorded in the audit)")
				wait := fs.Bool("wait", false, "wait (within --timeout) until the processor finished it and show the result")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args, "JOB"); err != nil {
						return err
					}
					v, ok := controlv1.MaintenanceJob_value["MAINTENANCE_JOB_"+strings.ToUpper(strings.ReplaceAll(args[0], "-", "_"))]
					if !ok || v == 0 {
						return usagef("JOB %q: want one of %s", args[0], maintenanceJobs)
					}
					if strings.TrimSpace(*operator) == "" || strings.TrimSpace(*reason) == "" {
						return usagef("--operator and --reason are required: who runs maintenance and why is recorded")
					}
					return a.maintenanceRun(ctx, &controlv1.RequestMaintenanceRequest{
						Job: controlv1.MaintenanceJob(v), DryRun: *dryRun, Operator: *operator, Reason: *reason}, *wait)
				}
			},
		}, {
			name:     "request",
			synopsis: "ID",
			summary:  "one maintenance request: PENDING until the processor took it, then DONE with what the job did (or would do) or FAILED with why",
			setup: func(*pflag.FlagSet) runFunc {
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args, "ID"); err != nil {
						return err
					}
					id, err := positiveID("maintenance request ID", args[0])
					if err != nil {
						return err
					}
					resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.GetMaintenanceRequestResponse, error) {
						return controlv1.NewMaintenanceServiceClient(c).GetMaintenanceRequest(ctx, &controlv1.GetMaintenanceRequestRequest{Id: id})
					})
					if err != nil || printed {
						return err
					}
					return a.maintenanceRequestTable(resp.GetRequest())
				}
			},
		}},
	}
}

func (a *app) maintenanceRun(ctx context.Context, req *controlv1.RequestMaintenanceRequest, wait bool) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	client := controlv1.NewMaintenanceServiceClient(conn)
	resp, err := client.RequestMaintenance(cctx, req)
	if err != nil {
		return err
	}
	m, err := awaitSettled(cctx, resp.GetRequest(), maintenancePoll,
		func(m *controlv1.MaintenanceRequest) bool {
			return wait && m.GetState() == controlv1.MaintenanceRequestState_MAINTENANCE_REQUEST_STATE_PENDING
		},
		func(ctx context.Context) (*controlv1.MaintenanceRequest, error) {
			got, err := client.GetMaintenanceRequest(ctx, &controlv1.GetMaintenanceRequestRequest{Id: resp.GetRequest().GetId()})
			return got.GetRequest(), err
		},
		func(m *controlv1.MaintenanceRequest, err error) error {
			return fmt.Errorf("maintenance request %d still PENDING after --timeout %v (is a processor running and holding its lease?); follow it with msgxctl maintenance request %d: %w",
				m.GetId(), a.timeout, m.GetId(), err)
		})
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(m)
	}
	if err := a.maintenanceRequestTable(m); err != nil {
		return err
	}
	if m.GetState() == controlv1.MaintenanceRequestState_MAINTENANCE_REQUEST_STATE_PENDING {
		fmt.Fprintf(a.stdout, "\nthe processor runs it at its next maintenance poll; follow it with msgxctl maintenance request %d\n", m.GetId())
	}
	return nil
}

func (a *app) maintenanceRequestTable(m *controlv1.MaintenanceRequest) error {
	tw := newTable(a.stdout)
	row(tw, "id", m.GetId())
	row(tw, "job", jobName(m.GetJob()))
	row(tw, "dry_run", m.GetDryRun())
	row(tw, "state", enumName(m.GetState(), "MAINTENANCE_REQUEST_STATE_"))
	row(tw, "operator", m.GetOperator())
	row(tw, "reason", cell(m.GetReason(), 200))
	row(tw, "requested_at", a.ts(m.GetRequestedAt()))
	row(tw, "started_at", a.ts(m.GetStartedAt()))
	row(tw, "finished_at", a.ts(m.GetFinishedAt()))
	row(tw, "run_id", int64Str(m.GetRunId()))
	row(tw, "error", orDash(m.GetError()))
	if err := tw.Flush(); err != nil {
		return err
	}
	if m.GetResultJson() != "" {
		_, err := fmt.Fprintf(a.stdout, "\nresult:\n%s\n", indentJSON(m.GetResultJson()))
		return err
	}
	return nil
}

// jobName is a job as the command line names it: history-sweep.
func jobName(j controlv1.MaintenanceJob) string {
	return strings.ReplaceAll(strings.ToLower(enumName(j, "MAINTENANCE_JOB_")), "_", "-")
}

// optCount shows a count the run did not record as "-".
func optCount(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
