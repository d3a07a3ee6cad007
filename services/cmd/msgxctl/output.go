package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// jsonOptions: proto field names (snake_case, as in the database and the
// .proto files) and every field present, so scripts can rely on the keys.
var jsonOptions = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// printJSON writes m as indented JSON. protojson's own output is
// deliberately unstable in whitespace; re-indenting makes it stable.
func (a *app) printJSON(m proto.Message) error {
	b, err := jsonOptions.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("indenting JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err = a.stdout.Write(out.Bytes())
	return err
}

// newTable returns a writer that aligns tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes one tab-separated table row.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprint(w, "\n")
}

// ts formats a timestamp in the local zone with its offset; "-" if absent.
func (a *app) ts(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().In(a.loc).Format(time.RFC3339)
}

// orDash shows an empty value as "-" so that table columns stay aligned.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// enumName strips the enum's type prefix: MESSAGE_STATE_DEAD → DEAD;
// UNSPECIFIED → "-".
func enumName(e fmt.Stringer, prefix string) string {
	n := strings.TrimPrefix(e.String(), prefix)
	if n == "UNSPECIFIED" {
		return "-"
	}
	return n
}

// cell makes free text safe for a table cell: one line, at most max runes.
func cell(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return orDash(s)
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// int64Str shows 0 (an absent ID) as "-".
func int64Str(v int64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}
