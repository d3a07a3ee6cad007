package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// seasonCommand is the "season" group: the stored season schedules
// (R-N9).
func seasonCommand() *command {
	return &command{
		name: "season",
		subs: []*command{{
			name:     "list",
			synopsis: "[--snam S] [--limit N] [--before ID]",
			summary:  "season windows (season name, airport, dates, flights, last message), newest first",
			setup: func(fs *pflag.FlagSet) runFunc {
				snam := fs.String("snam", "", "only windows of this season name, e.g. S26")
				page := bindPage(fs, 100, 1000, "before", "only windows with a smaller ID (the next page starts before the last ID shown)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					limit, before, err := page.values()
					if err != nil {
						return err
					}
					resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.ListSeasonSchedulesResponse, error) {
						return controlv1.NewInspectServiceClient(c).ListSeasonSchedules(ctx,
							&controlv1.ListSeasonSchedulesRequest{Snam: *snam, Limit: limit, BeforeId: before})
					})
					if err != nil || printed {
						return err
					}
					if err := a.seasonTable(resp.GetSchedules()...); err != nil {
						return err
					}
					a.morePages("before", resp.GetNextBeforeId(), int64(0))
					return nil
				}
			},
		}, {
			name:     "get",
			synopsis: "ID [--limit N] [--after SEQ]",
			summary:  "one season window with its flights in sequence order",
			setup: func(fs *pflag.FlagSet) runFunc {
				page := bindPage(fs, 100, 1000, "after", "only flights after this sequence number (the next page starts after the last one shown)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args, "ID"); err != nil {
						return err
					}
					id, err := positiveID("season schedule ID", args[0])
					if err != nil {
						return err
					}
					limit, after, err := page.values()
					if err != nil {
						return err
					}
					if after > 1<<31-1 {
						return usagef("--after %d: too large", after)
					}
					resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.GetSeasonScheduleResponse, error) {
						return controlv1.NewInspectServiceClient(c).GetSeasonSchedule(ctx,
							&controlv1.GetSeasonScheduleRequest{Id: id, Limit: limit, AfterSeq: int32(after)})
					})
					if err != nil || printed {
						return err
					}
					if err := a.seasonTable(resp.GetSchedule()); err != nil {
						return err
					}
					fmt.Fprintln(a.stdout)
					tw := newTable(a.stdout)
					row(tw, "SEQ", "ALCD", "FLNO", "MVIN", "DOC")
					for _, f := range resp.GetFlights() {
						row(tw, f.GetSeq(), f.GetAlcd(), f.GetFlno(), f.GetMvin(), cell(f.GetDocJson(), 100))
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					a.morePages("after", resp.GetNextAfterSeq(), int32(0))
					return nil
				}
			},
		}},
	}
}

func (a *app) seasonTable(list ...*controlv1.SeasonSchedule) error {
	tw := newTable(a.stdout)
	row(tw, "ID", "SNAM", "APCD", "SDAT", "EDAT", "FROM", "TO", "FLIGHTS", "LAST_MSG_ID", "UPDATED_AT")
	for _, s := range list {
		row(tw, s.GetId(), s.GetSnam(), s.GetApcd(), s.GetSdat(), s.GetEdat(), s.GetStartDate(), s.GetEndDate(),
			s.GetFlights(), s.GetLastMsgId(), a.ts(s.GetUpdatedAt()))
	}
	return tw.Flush()
}
