package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// backfillAcknowledgeCommand is "backfill acknowledge": close abandoned
// backfills an operator has looked at, so they leave the abandoned count
// (and its alert); audited with operator and reason.
func backfillAcknowledgeCommand() *command {
	return &command{
		name:     "acknowledge",
		synopsis: "ID... --operator NAME --reason TEXT",
		summary:  "close abandoned backfills (outbox IDs as 'backfill abandoned' shows them): they leave the abandoned count; audited",
		setup: func(fs *pflag.FlagSet) runFunc {
			operator := fs.String("operator", "", "who acknowledges (required; recorded in the audit)")
			reason := fs.String("reason", "", "why (required; recorded in the audit)")
			return func(ctx context.Context, a *app, args []string) error {
				if len(args) == 0 {
					return usagef("want the outbox ID of at least one abandoned backfill")
				}
				ids := make([]int64, 0, len(args))
				for _, s := range args {
					id, err := positiveID("outbox ID", s)
					if err != nil {
						return err
					}
					ids = append(ids, id)
				}
				switch {
				case strings.TrimSpace(*operator) == "":
					return usagef("--operator is required (the acknowledgement is audited)")
				case strings.TrimSpace(*reason) == "":
					return usagef("--reason is required (the acknowledgement is audited)")
				}
				return a.backfillAcknowledge(ctx, &controlv1.AcknowledgeBackfillsRequest{Ids: ids, Operator: *operator, Reason: *reason})
			}
		},
	}
}

func (a *app) backfillAcknowledge(ctx context.Context, req *controlv1.AcknowledgeBackfillsRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := controlv1.NewAdminServiceClient(conn).AcknowledgeBackfills(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	fmt.Fprintf(a.stdout, "acknowledged %d abandoned backfill(s) (audit %d)\n", resp.GetAcknowledged(), resp.GetAuditId())
	if len(resp.GetAcknowledgedIds()) > 0 {
		fmt.Fprintf(a.stdout, "acknowledged: %s\n", joinIDs(resp.GetAcknowledgedIds()))
	}
	if len(resp.GetSkippedIds()) > 0 {
		_, err = fmt.Fprintf(a.stdout, "skipped (missing, or not an abandoned backfill): %s\n", joinIDs(resp.GetSkippedIds()))
	}
	return err
}
