package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"msgexchange/libs/logging"
)

// A line logged with a span's context carries its trace and span IDs, as
// do lines of loggers derived with With; a line without one carries none.
func TestLogging_R_I4_TraceIDsInLogLines(t *testing.T) {
	var buf bytes.Buffer
	log := logging.New(&buf, logging.Config{Format: "json", Level: "info"}).With("component", "processor")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	log.InfoContext(ctx, "message applied", "msg_id", 7, "flid", 42)
	log.Info("no span here")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var with, without map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &with))
	require.NoError(t, json.Unmarshal(lines[1], &without))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", with["trace_id"])
	require.Equal(t, "00f067aa0ba902b7", with["span_id"])
	require.Equal(t, "processor", with["component"])
	require.EqualValues(t, 42, with["flid"])
	require.NotContains(t, without, "trace_id")
	require.NotContains(t, without, "span_id")

	buf.Reset()
	logging.New(&buf, logging.Config{Format: "text", Level: "info"}).InfoContext(ctx, "text too")
	require.Contains(t, buf.String(), "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7")
}
