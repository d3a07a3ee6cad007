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

// censusPoll is how often "mailbox census" asks whether a dispatcher
// counted the census.
const censusPoll = 200 * time.Millisecond

// mailboxCommand is the "mailbox" group: mailbox IDs that came again with
// a different text (R-L5, C-3), and the mailbox's figures for the cutover
// from the predecessor (R-L6).
func mailboxCommand() *command {
	return &command{
		name: "mailbox",
		subs: []*command{{
			name:     "census",
			synopsis: "[--start ID] --operator NAME",
			summary:  "the shared mailbox's figures for the cutover from the predecessor (docs/runbook.md): the next ID, the ID after the last marked row and, from --start, the rows, the unmarked rows and the unmarked rows below; a dispatcher counts them",
			setup: func(fs *pflag.FlagSet) runFunc {
				start := fs.Int64("start", 0, "the cut the counts are taken at: S in the runbook's step 2, START in steps 4 and 5 (0: only the next ID and the ID after the last marked row)")
				operator := fs.String("operator", "", "who asks (required, recorded: each census makes the mailbox count its table)")
				return func(ctx context.Context, a *app, args []string) error {
					if err := exactArgs(args); err != nil {
						return err
					}
					if *start < 0 {
						return usagef("--start %d: must not be negative", *start)
					}
					if strings.TrimSpace(*operator) == "" {
						return usagef("--operator is required: who asks the mailbox for a census is recorded")
					}
					return a.mailboxCensus(ctx, &controlv1.RequestMailboxCensusRequest{StartId: *start, Operator: *operator})
				}
			},
		}, {
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

// mailboxCensus requests a census and waits, within --timeout, until a
// dispatcher counted it.
func (a *app) mailboxCensus(ctx context.Context, req *controlv1.RequestMailboxCensusRequest) error {
	conn, err := a.client()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	client := controlv1.NewMaintenanceServiceClient(conn)
	resp, err := client.RequestMailboxCensus(cctx, req)
	if err != nil {
		return err
	}
	c, err := awaitSettled(cctx, resp.GetCensus(), censusPoll,
		func(c *controlv1.MailboxCensus) bool {
			return c.GetState() == controlv1.MailboxCensusState_MAILBOX_CENSUS_STATE_PENDING
		},
		func(ctx context.Context) (*controlv1.MailboxCensus, error) {
			got, err := client.GetMailboxCensus(ctx, &controlv1.GetMailboxCensusRequest{Id: resp.GetCensus().GetId()})
			return got.GetCensus(), err
		},
		func(c *controlv1.MailboxCensus, err error) error {
			return fmt.Errorf("mailbox census %d not counted within --timeout %v (is a dispatcher running and reaching the mailbox?); a dispatcher counts it later: ask again with a longer --timeout: %w",
				c.GetId(), a.timeout, err)
		})
	if err != nil {
		return err
	}
	if a.structured() {
		if err := a.printStructured(c); err != nil {
			return err
		}
	} else if err := a.mailboxCensusTable(c); err != nil {
		return err
	}
	if c.GetState() == controlv1.MailboxCensusState_MAILBOX_CENSUS_STATE_FAILED {
		return fmt.Errorf("mailbox census %d failed: %s", c.GetId(), c.GetError())
	}
	return nil
}

// mailboxCensusTable prints a census, each figure named as the runbook's
// step that asks for it ("Taking over from the predecessor").
func (a *app) mailboxCensusTable(c *controlv1.MailboxCensus) error {
	tw := newTable(a.stdout)
	row(tw, "census", c.GetId(), "")
	row(tw, "state", enumName(c.GetState(), "MAILBOX_CENSUS_STATE_"), orDash(c.GetError()))
	row(tw, "start", int64Str(c.GetStartId()), "")
	row(tw, "next_id", optCount(c.NextId), "step 1: S, the largest mailbox ID + 1")
	row(tw, "rows_from_start", optCount(c.RowsFromStart), "step 2: rows with ID >= start, marked or not")
	row(tw, "after_last_marked", optCount(c.AfterLastMarked), "step 3: START, the largest marked ID + 1")
	row(tw, "unmarked_from_start", optCount(c.UnmarkedFromStart), "step 4: unmarked rows with ID >= start")
	row(tw, "unmarked_below_start", optCount(c.UnmarkedBelowStart), "step 5: unmarked rows with ID < start")
	row(tw, "counted_at", a.ts(c.GetFinishedAt()), "")
	return tw.Flush()
}
