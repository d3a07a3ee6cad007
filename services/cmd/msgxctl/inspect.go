package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// fetch makes one control-plane call within --timeout. With -o json or
// yaml it prints the response itself and reports printed; a table is the
// caller's to write from resp.
func fetch[T proto.Message](ctx context.Context, a *app, call func(context.Context, *grpc.ClientConn) (T, error)) (resp T, printed bool, err error) {
	conn, err := a.client()
	if err != nil {
		return resp, false, err
	}
	cctx, cancel := a.callCtx(ctx)
	defer cancel()
	if resp, err = call(cctx, conn); err != nil {
		return resp, false, err
	}
	if a.structured() {
		return resp, true, a.printStructured(resp)
	}
	return resp, false, nil
}

// pageFlags are the --limit and cursor flags of a paged listing.
type pageFlags struct {
	limit  *int
	cursor *int64
	name   string
}

// bindPage registers --limit (default def, the server caps it at max) and
// the int64 cursor flag name (e.g. "before": only rows with a smaller ID)
// with its help text.
func bindPage(fs *pflag.FlagSet, def, max int, name, help string) *pageFlags {
	return &pageFlags{
		limit:  fs.Int("limit", def, fmt.Sprintf("maximum rows (the server caps it at %d)", max)),
		cursor: fs.Int64(name, 0, help),
		name:   name,
	}
}

// values checks the flags and returns the limit for the request and the
// cursor.
func (p *pageFlags) values() (int32, int64, error) {
	if *p.limit <= 0 {
		return 0, 0, usagef("--limit %d: must be positive", *p.limit)
	}
	if *p.cursor < 0 {
		return 0, 0, usagef("--%s %d: must not be negative", p.name, *p.cursor)
	}
	return int32(min(*p.limit, 1<<30)), *p.cursor, nil
}

// morePages tells how to get the next page when there is one.
func (a *app) morePages(flag string, next any, zero any) {
	if next != zero {
		fmt.Fprintf(a.stdout, "\nmore: repeat with --%s %v\n", flag, next)
	}
}
