package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// mailboxCommand is the "mailbox" group: mailbox IDs that came again with
// a different text (R-L5, C-3).
func mailboxCommand() *command {
	return &command{
		name: "mailbox",
		subs: []*command{{
			name:     "reused",
			synopsis: "[--msg-id ID] [--texts] [--limit N] [--page TOKEN]",
			summary:  "mailbox IDs seen again with a different text, newest detection first: both hashes, when, how often; --texts shows the text that ran and the held one",
			setup: func(fs *pflag.FlagSet) runFunc {
				msgID := fs.Int64("msg-id", 0, "only this mailbox ID")
				texts := fs.Bool("texts", false, "show both texts (the one that ran under the ID and the held one)")
				limit := fs.Int("limit", 100, "maximum rows (the server caps it at 1000)")
				page := fs.String("page", "", "continue a listing: the token the previous page printed")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					if *limit <= 0 {
						return usagef("--limit %d: must be positive", *limit)
					}
					if *msgID < 0 {
						return usagef("--msg-id %d: must not be negative", *msgID)
					}
					req := &controlv1.ListMailboxReuseRequest{MsgId: *msgID, WithTexts: *texts, Limit: int32(min(*limit, 1<<30)), PageToken: *page}
					resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.ListMailboxReuseResponse, error) {
						return controlv1.NewInspectServiceClient(c).ListMailboxReuse(ctx, req)
					})
					if err != nil || printed {
						return err
					}
					tw := newTable(a.stdout)
					row(tw, "MSG_ID", "HELD_SHA256", "FIRST_SHA256", "RECEIVED_AT", "DETECTED_AT", "LAST_SEEN_AT", "SEEN")
					for _, e := range resp.GetEntries() {
						row(tw, e.GetMsgId(), cell(e.GetTextSha256(), 16), cell(e.GetFirstSha256(), 16), a.ts(e.GetReceivedAt()),
							a.ts(e.GetDetectedAt()), a.ts(e.GetLastSeenAt()), e.GetSeen())
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					if *texts {
						for _, e := range resp.GetEntries() {
							fmt.Fprintf(a.stdout, "\nmailbox ID %d, text that ran (%s):\n%s\nheld text (%s):\n%s\n",
								e.GetMsgId(), e.GetFirstSha256(), e.GetFirstRaw(), e.GetTextSha256(), e.GetRaw())
						}
					}
					a.morePages("page", resp.GetNextPageToken(), "")
					return nil
				}
			},
		}},
	}
}
