package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// flightArchivedCommand is "flight archived": a flight's versions the
// history sweep archived, with their documents (R-N9).
func flightArchivedCommand() *command {
	return &command{
		name:     "archived",
		synopsis: "FLID [--limit N] [--before VERSION]",
		summary:  "a flight's archived versions (flight_history) with their documents, newest first",
		setup: func(fs *pflag.FlagSet) runFunc {
			page := bindPage(fs, 20, 100, "before", "only versions below this one (the next page starts before the last version shown)")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args, "FLID"); err != nil {
					return err
				}
				flid, err := positiveID("FLID", args[0])
				if err != nil {
					return err
				}
				limit, before, err := page.values()
				if err != nil {
					return err
				}
				resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.GetArchivedFlightResponse, error) {
					return controlv1.NewInspectServiceClient(c).GetArchivedFlight(ctx,
						&controlv1.GetArchivedFlightRequest{Flid: flid, Limit: limit, BeforeVersion: before})
				})
				if err != nil || printed {
					return err
				}
				if resp.GetLive() {
					fmt.Fprintf(a.stdout, "flight %d is live again (sent after the sweep): see msgxctl flight get %d\n\n", flid, flid)
				}
				for i, v := range resp.GetVersions() {
					if i > 0 {
						fmt.Fprintln(a.stdout)
					}
					h := v.GetVersion()
					tw := newTable(a.stdout)
					row(tw, "version", h.GetStateVersion())
					row(tw, "state", enumName(h.GetState(), "FLIGHT_STATE_"))
					row(tw, "operation_day", orDash(h.GetOperationDay()))
					row(tw, "master_flid", int64Str(v.GetMasterFlid()))
					row(tw, "last_msg_id", h.GetLastMsgId())
					row(tw, "created_at", a.ts(v.GetCreatedAt()))
					row(tw, "updated_at", a.ts(h.GetUpdatedAt()))
					row(tw, "archived_at", a.ts(h.GetArchivedAt()))
					if err := tw.Flush(); err != nil {
						return err
					}
					fmt.Fprintf(a.stdout, "doc: %s\n", indentJSON(v.GetDocJson()))
				}
				a.morePages("before", resp.GetNextBeforeVersion(), int64(0))
				return nil
			}
		},
	}
}

// indentJSON indents a JSON document for a table's reader; a document that
// is not JSON is shown as it is rather than hidden.
func indentJSON(doc string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(doc), "", "  "); err != nil {
		return doc
	}
	return b.String()
}
