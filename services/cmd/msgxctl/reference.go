package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// referenceCommand is the "reference" group: the reference data (ref_data)
// by type and key (R-N9).
func referenceCommand() *command {
	return &command{
		name:    "reference",
		aliases: []string{"ref"},
		subs: []*command{{
			name:     "list",
			synopsis: "[TYPE [KEY]] [--prefix P] [--limit N] [--after TYPE/KEY]",
			summary:  "reference data rows in (type, key) order, with the row count of every type; TYPE KEY shows one row with its document",
			setup: func(fs *pflag.FlagSet) runFunc {
				prefix := fs.String("prefix", "", "only keys that start with this")
				limit := fs.Int("limit", 100, "maximum rows (the server caps it at 1000)")
				after := fs.String("after", "", "only rows after this TYPE/KEY (the next page starts after the last row shown)")
				return func(ctx context.Context, a *app, args []string) error {
					if len(args) > 2 {
						return usagef("want at most TYPE and KEY, got %q", strings.Join(args, " "))
					}
					if *limit <= 0 {
						return usagef("--limit %d: must be positive", *limit)
					}
					req := &controlv1.ListReferenceDataRequest{KeyPrefix: *prefix, Limit: int32(min(*limit, 1<<30))}
					if len(args) > 0 {
						req.Type = args[0]
					}
					if len(args) > 1 {
						req.Key = args[1]
					}
					if *after != "" {
						t, k, ok := strings.Cut(*after, "/")
						if !ok {
							return usagef("--after %q: want TYPE/KEY", *after)
						}
						req.AfterType, req.AfterKey = t, k
					}
					return a.referenceList(ctx, req)
				}
			},
		}},
	}
}

func (a *app) referenceList(ctx context.Context, req *controlv1.ListReferenceDataRequest) error {
	resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.ListReferenceDataResponse, error) {
		return controlv1.NewInspectServiceClient(c).ListReferenceData(ctx, req)
	})
	if err != nil || printed {
		return err
	}
	if req.GetKey() != "" && len(resp.GetItems()) == 1 {
		d := resp.GetItems()[0]
		tw := newTable(a.stdout)
		row(tw, "type", d.GetType())
		row(tw, "key", d.GetKey())
		row(tw, "last_msg_id", d.GetLastMsgId())
		row(tw, "updated_at", a.ts(d.GetUpdatedAt()))
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err := fmt.Fprintf(a.stdout, "\ndoc:\n%s\n", indentJSON(d.GetDocJson()))
		return err
	}
	tw := newTable(a.stdout)
	row(tw, "TYPE", "KEY", "LAST_MSG_ID", "UPDATED_AT", "DOC")
	for _, d := range resp.GetItems() {
		row(tw, d.GetType(), d.GetKey(), d.GetLastMsgId(), a.ts(d.GetUpdatedAt()), cell(d.GetDocJson(), 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if resp.GetNextAfterType() != "" {
		a.morePages("after", resp.GetNextAfterType()+"/"+resp.GetNextAfterKey(), "")
	}
	var types []string
	for _, t := range slices.Sorted(maps.Keys(resp.GetTypes())) {
		types = append(types, fmt.Sprintf("%s %d", t, resp.GetTypes()[t]))
	}
	_, err = fmt.Fprintf(a.stdout, "\nrows per type: %s\n", orDash(strings.Join(types, ", ")))
	return err
}
