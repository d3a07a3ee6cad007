package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
)

// replaySelectorSynopsis is the selector part of the replay commands.
const replaySelectorSynopsis = "(ID... | --class C[,C] --from T --to T [--limit N])"

// replayCommand is the "replay" group: send failed or dead messages through
// the pipeline again (R-F1, US-10).
func replayCommand() *command {
	return &command{
		name: "replay",
		subs: []*command{
			{
				name:     "preview",
				synopsis: replaySelectorSynopsis,
				summary:  "list the messages a replay would match, each replayable or not with the reason; changes nothing",
				setup: func(fs *pflag.FlagSet) runFunc {
					sel := bindSelectorFlags(fs)
					return func(ctx context.Context, a *app, args []string) error {
						s, err := sel.build(args)
						if err != nil {
							return err
						}
						return a.replayPreview(ctx, s)
					}
				},
			},
			{
				name:     "execute",
				synopsis: replaySelectorSynopsis + " --operator NAME --reason TEXT",
				summary:  "record a replay of the replayable matched messages; the processor applies it at its next step",
				setup: func(fs *pflag.FlagSet) runFunc {
					sel := bindSelectorFlags(fs)
					operator := fs.String("operator", "", "who replays (required, recorded in the audit)")
					reason := fs.String("reason", "", "why (required, recorded in the audit)")
					return func(ctx context.Context, a *app, args []string) error {
						s, err := sel.build(args)
						if err != nil {
							return err
						}
						if strings.TrimSpace(*operator) == "" || strings.TrimSpace(*reason) == "" {
							return usagef("--operator and --reason are required: who replays and why is recorded")
						}
						return a.replayExecute(ctx, &controlv1.ExecuteReplayRequest{Selector: s, Operator: *operator, Reason: *reason})
					}
				},
			},
			replayListCommand(),
			{
				name:     "status",
				synopsis: "ID",
				summary:  "one replay request: PENDING until the processor applied it, then DONE with what it replayed and refused",
				setup: func(*pflag.FlagSet) runFunc {
					return func(ctx context.Context, a *app, args []string) error {
						if err := exactArgs(args, "ID"); err != nil {
							return err
						}
						id, err := positiveID("replay request ID", args[0])
						if err != nil {
							return err
						}
						return a.replayStatus(ctx, id)
					}
				},
			},
		},
	}
}

// selectorFlags are the selector flags of a replay command.
type selectorFlags struct {
	classes, from, to *string
	limit             *int
}

func bindSelectorFlags(fs *pflag.FlagSet) *selectorFlags {
	return &selectorFlags{
		classes: fs.String("class", "", "error classes, comma-separated: codec_error, unsupported, infra, exhausted (others only show as not replayable)"),
		from:    fs.String("from", "", "start of the time range (RFC 3339, inclusive) of finished_at, or updated_at for FAILED messages"),
		to:      fs.String("to", "", "end of the time range (RFC 3339, exclusive)"),
		limit:   fs.Int("limit", 0, "maximum matched messages of a class selection, smallest ID first (0: the server's 100; at most 1000)"),
	}
}

// build turns the positional IDs and the flags into a selector.
func (f *selectorFlags) build(args []string) (*controlv1.ReplaySelector, error) {
	s := &controlv1.ReplaySelector{}
	for _, a := range args {
		id, err := positiveID("mailbox ID", a)
		if err != nil {
			return nil, err
		}
		s.MsgIds = append(s.MsgIds, id)
	}
	hasClassFlags := *f.classes != "" || *f.from != "" || *f.to != "" || *f.limit != 0
	switch {
	case len(s.MsgIds) > 0 && hasClassFlags:
		return nil, usagef("give mailbox IDs or --class with --from/--to, not both")
	case len(s.MsgIds) > 0:
		return s, nil
	case *f.classes == "":
		return nil, usagef("give mailbox IDs, or --class with --from and --to")
	}
	for _, c := range strings.Split(*f.classes, ",") {
		v, ok := controlv1.ErrorClass_value["ERROR_CLASS_"+strings.ToUpper(strings.TrimSpace(c))]
		if !ok || v == 0 {
			return nil, usagef("--class %q: want codec_error, unsupported, infra, exhausted, malformed or protocol", c)
		}
		s.ErrorClasses = append(s.ErrorClasses, controlv1.ErrorClass(v))
	}
	if *f.from == "" || *f.to == "" {
		return nil, usagef("--class needs --from and --to (RFC 3339, e.g. 2026-03-01T00:00:00+08:00)")
	}
	for _, p := range []struct {
		name string
		v    string
		dst  **timestamppb.Timestamp
	}{{"--from", *f.from, &s.From}, {"--to", *f.to, &s.To}} {
		t, err := time.Parse(time.RFC3339, p.v)
		if err != nil {
			return nil, usagef("%s %q: want RFC 3339, e.g. 2026-03-01T00:00:00+08:00", p.name, p.v)
		}
		*p.dst = timestamppb.New(t)
	}
	if *f.limit < 0 {
		return nil, usagef("--limit %d: must not be negative", *f.limit)
	}
	s.Limit = int32(min(*f.limit, 1<<30))
	return s, nil
}

func (a *app) replayClient() (controlv1.ReplayServiceClient, error) {
	conn, err := a.client()
	if err != nil {
		return nil, err
	}
	return controlv1.NewReplayServiceClient(conn), nil
}

func (a *app) replayPreview(ctx context.Context, sel *controlv1.ReplaySelector) error {
	c, err := a.replayClient()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := c.Preview(cctx, &controlv1.PreviewReplayRequest{Selector: sel})
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	if len(resp.GetMessages()) > 0 {
		if err := a.candidateTable(resp.GetMessages()); err != nil {
			return err
		}
		fmt.Fprintln(a.stdout)
	}
	_, err = fmt.Fprintf(a.stdout, "%d matched, %d replayable\n", resp.GetCount(), resp.GetReplayableCount())
	if err != nil {
		return err
	}
	return a.replayNotes(resp.GetMissingIds(), resp.GetTruncated())
}

func (a *app) replayExecute(ctx context.Context, req *controlv1.ExecuteReplayRequest) error {
	c, err := a.replayClient()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := c.Execute(cctx, req)
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	r := resp.GetRequest()
	fmt.Fprintf(a.stdout, "replay request %d recorded (%s): %d message(s): %s\n",
		r.GetId(), enumName(r.GetState(), "REPLAY_REQUEST_STATE_"), len(r.GetMsgIds()), idList(r.GetMsgIds()))
	if len(resp.GetNotReplayable()) > 0 {
		fmt.Fprintf(a.stdout, "\nleft out (not replayable):\n")
		if err := a.candidateTable(resp.GetNotReplayable()); err != nil {
			return err
		}
	}
	if err := a.replayNotes(resp.GetMissingIds(), resp.GetTruncated()); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "\nthe processor applies it at its next step; check with: msgxctl replay status %d\n", r.GetId())
	return err
}

func (a *app) replayStatus(ctx context.Context, id int64) error {
	c, err := a.replayClient()
	if err != nil {
		return err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	resp, err := c.GetReplayRequest(cctx, &controlv1.GetReplayRequestRequest{Id: id})
	if err != nil {
		return err
	}
	if a.structured() {
		return a.printStructured(resp)
	}
	r := resp.GetRequest()
	tw := newTable(a.stdout)
	row(tw, "id", r.GetId())
	row(tw, "state", enumName(r.GetState(), "REPLAY_REQUEST_STATE_"))
	row(tw, "operator", cell(r.GetOperator(), 80))
	row(tw, "reason", cell(r.GetReason(), 80))
	row(tw, "requested_at", a.ts(r.GetRequestedAt()))
	row(tw, "applied_at", a.ts(r.GetAppliedAt()))
	row(tw, "msg_ids", idList(r.GetMsgIds()))
	if r.GetState() == controlv1.ReplayRequestState_REPLAY_REQUEST_STATE_DONE {
		row(tw, "replayed", r.GetReplayed())
		row(tw, "refused", r.GetRefused())
		row(tw, "refused_ids", idList(r.GetRefusedIds()))
	}
	row(tw, "selector", r.GetSelectorJson())
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.GetEntries()) == 0 {
		return nil
	}
	fmt.Fprintf(a.stdout, "\nreplayed:\n")
	tw = newTable(a.stdout)
	row(tw, "MSG_ID", "PREVIOUS_STATE", "PREVIOUS_CLASS", "PREVIOUS_ATTEMPTS", "AT", "PREVIOUS_REASON")
	for _, e := range r.GetEntries() {
		row(tw, e.GetMsgId(), enumName(e.GetPreviousState(), "MESSAGE_STATE_"), enumName(e.GetPreviousClass(), "ERROR_CLASS_"),
			e.GetPreviousAttempts(), a.ts(e.GetAt()), cell(e.GetPreviousReason(), lastErrorWidth))
	}
	return tw.Flush()
}

// candidateTable prints matched messages.
func (a *app) candidateTable(cs []*controlv1.ReplayCandidate) error {
	tw := newTable(a.stdout)
	row(tw, "MSG_ID", "STATE", "CLASS", "TYPE", "STYP", "ATTEMPTS", "FINISHED_AT", "REPLAYABLE", "REFUSAL", "REASON")
	for _, c := range cs {
		ok := "yes"
		if !c.GetReplayable() {
			ok = "no"
		}
		row(tw, c.GetMsgId(), enumName(c.GetState(), "MESSAGE_STATE_"), enumName(c.GetErrorClass(), "ERROR_CLASS_"),
			orDash(c.GetType()), orDash(c.GetStyp()), c.GetAttempts(), a.ts(c.GetFinishedAt()), ok,
			cell(c.GetRefusal(), 60), cell(c.GetReason(), lastErrorWidth))
	}
	return tw.Flush()
}

// replayNotes prints the missing IDs and the truncation warning.
func (a *app) replayNotes(missing []int64, truncated bool) error {
	if len(missing) > 0 {
		if _, err := fmt.Fprintf(a.stdout, "not found (never registered or cleaned up): %s\n", idList(missing)); err != nil {
			return err
		}
	}
	if truncated {
		if _, err := fmt.Fprintln(a.stdout, "more messages match than --limit: narrow the time range or repeat after this batch"); err != nil {
			return err
		}
	}
	return nil
}

// idList shows IDs comma-separated; "-" when none.
func idList(ids []int64) string {
	if len(ids) == 0 {
		return "-"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

// replayListCommand is "replay list": the recorded replay requests (R-N9).
func replayListCommand() *command {
	return &command{
		name:     "list",
		synopsis: "[--state pending|done] [--limit N] [--before ID]",
		summary:  "recorded replay requests, newest first: who, why, how many messages, PENDING or DONE with what was replayed and refused",
		setup: func(fs *pflag.FlagSet) runFunc {
			state := fs.String("state", "", "only requests in this state: pending or done (default both)")
			page := bindPage(fs, 100, 1000, "before", "only requests with a smaller ID (the next page starts before the last ID shown)")
			return func(ctx context.Context, a *app, args []string) error {
				if err := exactArgs(args); err != nil {
					return err
				}
				limit, before, err := page.values()
				if err != nil {
					return err
				}
				req := &controlv1.ListReplayRequestsRequest{Limit: limit, BeforeId: before}
				if *state != "" {
					v, ok := controlv1.ReplayRequestState_value["REPLAY_REQUEST_STATE_"+strings.ToUpper(*state)]
					if !ok || v == 0 {
						return usagef("--state %q: want pending or done", *state)
					}
					req.State = controlv1.ReplayRequestState(v)
				}
				resp, printed, err := fetch(ctx, a, func(ctx context.Context, c *grpc.ClientConn) (*controlv1.ListReplayRequestsResponse, error) {
					return controlv1.NewReplayServiceClient(c).ListReplayRequests(ctx, req)
				})
				if err != nil || printed {
					return err
				}
				tw := newTable(a.stdout)
				row(tw, "ID", "STATE", "MESSAGES", "REPLAYED", "REFUSED", "OPERATOR", "REASON", "REQUESTED_AT", "APPLIED_AT")
				for _, r := range resp.GetRequests() {
					row(tw, r.GetId(), enumName(r.GetState(), "REPLAY_REQUEST_STATE_"), len(r.GetMsgIds()), r.GetReplayed(), r.GetRefused(),
						cell(r.GetOperator(), 24), cell(r.GetReason(), 50), a.ts(r.GetRequestedAt()), a.ts(r.GetAppliedAt()))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				a.morePages("before", resp.GetNextBeforeId(), int64(0))
				return nil
			}
		},
	}
}
