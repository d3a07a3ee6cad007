package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// snapshotCommand is the "snapshot" group: the log of finished daily
// snapshot packages (R-L7, SCHD_SNAP_LOG).
func snapshotCommand() *command {
	return &command{
		name: "snapshot",
		subs: []*command{{
			name:     "log",
			synopsis: "[--msg-id ID] [--limit N] [--before ID]",
			summary:  "finished daily snapshot packages, newest first: days, records, changed, deleted, unchanged, batches, duration, outcome (kept 90 days)",
			setup: func(fs *pflag.FlagSet) runFunc {
				msgID := fs.Int64("msg-id", 0, "only the runs of this snapshot message")
				page := bindPage(fs, 100, 1000, "before", "only rows with a smaller ID (the next page starts before the last ID shown)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					limit, before, err := page.values()
					if err != nil {
						return err
					}
					if *msgID < 0 {
						return usagef("--msg-id %d: must not be negative", *msgID)
					}
					resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.ListSnapshotLogResponse, error) {
						return controlv1.NewInspectServiceClient(c).ListSnapshotLog(ctx,
							&controlv1.ListSnapshotLogRequest{MsgId: *msgID, Limit: limit, BeforeId: before})
					})
					if err != nil || printed {
						return err
					}
					tw := newTable(a.stdout)
					row(tw, "ID", "MSG_ID", "STYP", "DAYS", "RECORDS", "CHANGED", "DELETED", "UNCHANGED", "BATCHES", "FINISHED_AT", "DURATION", "OUTCOME")
					for _, e := range resp.GetEntries() {
						row(tw, e.GetId(), e.GetMsgId(), e.GetStyp(), cell(strings.Join(e.GetDays(), ","), 40), e.GetRecords(), e.GetChanged(),
							e.GetDeleted(), e.GetUnchanged(), e.GetBatches(), a.ts(e.GetFinishedAt()),
							(time.Duration(e.GetDurationMs()) * time.Millisecond).String(), e.GetOutcome())
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					a.morePages("before", resp.GetNextBeforeId(), int64(0))
					return nil
				}
			},
		}},
	}
}
