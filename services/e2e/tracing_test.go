package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/otlptest"
)

// TestTracing_R_I4_OneTraceIngestToProjector runs every service as its own
// process exporting spans to an in-process OTLP receiver, inserts one
// mailbox message (a snapshot of two flights) and follows it: the receiver
// gets spans of ingest, processor, dispatcher and projector under ONE
// trace ID, rooted at the ingest span that read the mailbox row, each
// span's parent in the same trace — the context crossed the inbox record's
// headers, proc_state (the execution runs from the FIFO head), the outbox
// rows and the flight-state records' headers. The spans about records
// carry OpenTelemetry's messaging attributes as exported (R-N2: system,
// operation type, topic, partition, offset, the projector's group). The
// log lines of the message's handling name the trace and the flights.
func TestTracing_R_I4_OneTraceIngestToProjector(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	s := newStack(t)
	tracing := []string{"-tracing.otlp-endpoint=" + rcv.Endpoint, "-tracing.otlp-insecure=true", "-log.level=debug"}
	for _, target := range []string{"processor", "dispatcher", "projector", "ingest"} {
		s.start(target, tracing...)
	}
	id := s.insert(readCorpus(t, "SCHD-DNLD-1.xml"))
	msgID := strconv.FormatInt(id, 10)

	// The message's trace is the one of its ingest span.
	var traceID string
	ok := rcv.WaitFor(90*time.Second, func(spans []otlptest.Span) bool {
		for _, sp := range spans {
			if sp.Name == "ingest.publish" && sp.Attrs["msgx.msg_id"] == msgID {
				traceID = sp.TraceID
			}
		}
		if traceID == "" {
			return false
		}
		applied := map[string]bool{}
		relayed := map[string]bool{}
		for _, sp := range spans {
			if sp.TraceID != traceID {
				continue
			}
			switch sp.Name {
			case "projector.apply":
				applied[sp.Attrs["msgx.flid"]] = true
			case "dispatcher.relay":
				relayed[sp.Attrs["msgx.target"]+"/"+sp.Attrs["msgx.flid"]] = true
			}
		}
		return applied["15"] && applied["16"] && relayed["flight-state/15"] && relayed["msg/15"] && relayed["schd/15"] &&
			relayed["flight-state/16"] && relayed["msg/16"] && relayed["schd/16"]
	})
	if !ok {
		for _, sp := range rcv.Spans() {
			t.Logf("span %s/%s %s trace=%s parent=%s attrs=%v", sp.Service, sp.Scope, sp.Name, sp.TraceID, sp.ParentID, sp.Attrs)
		}
		t.Fatalf("no complete trace of message %d (ingest → processor → dispatcher → projector) within the deadline", id)
	}

	var trace []otlptest.Span
	byID := map[string]otlptest.Span{}
	for _, sp := range rcv.Spans() {
		if sp.TraceID == traceID {
			trace = append(trace, sp)
			byID[sp.SpanID] = sp
		}
	}
	services := map[string]bool{}
	names := map[string]bool{}
	var roots []string
	for _, sp := range trace {
		services[sp.Service] = true
		names[sp.Service+" "+sp.Name] = true
		if sp.ParentID == "" {
			roots = append(roots, sp.Name)
			continue
		}
		_, ok := byID[sp.ParentID]
		require.True(t, ok, "span %s of %s has its parent %s in the same trace", sp.Name, sp.Service, sp.ParentID)
	}
	require.Equal(t, []string{"ingest.publish"}, roots, "one root: the ingest span that read the mailbox row")
	for _, svc := range []string{"msgx-ingest", "msgx-processor", "msgx-dispatcher", "msgx-projector"} {
		require.True(t, services[svc], "the trace has spans of %s; services: %v", svc, services)
	}
	for _, n := range []string{
		"msgx-ingest ingest.publish", "msgx-ingest msgx.inbox publish",
		"msgx-processor msgx.inbox receive", "msgx-processor processor.register", "msgx-processor processor.execute",
		"msgx-dispatcher dispatcher.relay",
		"msgx-projector msgx.flight-state receive", "msgx-projector projector.apply",
	} {
		require.True(t, names[n], "span %q in the trace; have %v", n, names)
	}
	// The execution (from the FIFO head) is the child of the registration
	// (from the record), and carries the message and its flights.
	for _, sp := range trace {
		if sp.Name == "processor.execute" {
			require.Equal(t, "processor.register", byID[sp.ParentID].Name)
			require.Equal(t, msgID, sp.Attrs["msgx.msg_id"])
			require.Equal(t, "2", sp.Attrs["msgx.flights"])
		}
		if sp.Name == "projector.apply" {
			require.Equal(t, msgID, sp.Attrs["msgx.msg_id"])
		}
	}
	// R-N2: the spans about records carry OpenTelemetry's messaging
	// attributes, as the exporter sent them: system, operation, topic,
	// and where the record is (partition, offset) or who read it (group).
	messaging := map[string]map[string]string{
		"msgx-ingest ingest.publish":               {"messaging.operation.type": "send", "messaging.destination.name": s.kafka.Topics.Inbox},
		"msgx-processor processor.register":        {"messaging.operation.type": "process", "messaging.destination.name": s.kafka.Topics.Inbox},
		"msgx-dispatcher dispatcher.relay":         {"messaging.operation.type": "send"},
		"msgx-projector msgx.flight-state receive": {"messaging.operation.type": "receive", "messaging.destination.name": s.kafka.Topics.FlightState},
		"msgx-projector projector.apply":           {"messaging.operation.type": "process", "messaging.destination.name": s.kafka.Topics.FlightState},
	}
	seen := map[string]bool{}
	for _, sp := range trace {
		want, ok := messaging[sp.Service+" "+sp.Name]
		if !ok {
			continue
		}
		seen[sp.Service+" "+sp.Name] = true
		require.Equal(t, "kafka", sp.Attrs["messaging.system"], "%s %s", sp.Service, sp.Name)
		for k, v := range want {
			require.Equal(t, v, sp.Attrs[k], "%s %s: %s", sp.Service, sp.Name, k)
		}
		require.NotEmpty(t, sp.Attrs["messaging.destination.partition.id"], "%s %s: the record's partition", sp.Service, sp.Name)
		require.NotEmpty(t, sp.Attrs["messaging.kafka.offset"], "%s %s: the record's offset", sp.Service, sp.Name)
		if strings.HasPrefix(sp.Service+" "+sp.Name, "msgx-projector") {
			require.NotEmpty(t, sp.Attrs["messaging.consumer.group.name"], "%s %s: the projector's group", sp.Service, sp.Name)
		}
	}
	require.Len(t, seen, len(messaging), "spans with messaging attributes: %v", seen)

	// The log lines of the message's handling lead to the trace, and name
	// the flights they are about.
	logs := func(name string) string {
		b, err := os.ReadFile(filepath.Join(s.logDir, name+".log"))
		require.NoError(t, err)
		return string(b)
	}
	require.Regexp(t, regexp.MustCompile(`msg="message applied" .*msg_id=`+msgID+` .*flids="?\[15 16\]"? flights=2 trace_id=`+traceID), logs("processor"))
	require.Regexp(t, regexp.MustCompile(`msg="relaying outbox row" .*target=flight-state flid=15 msg_id=`+msgID+` .*trace_id=`+traceID), logs("dispatcher"))
	require.Regexp(t, regexp.MustCompile(`msg="projected flight" .*flid=15 .*msg_id=`+msgID+` .*trace_id=`+traceID), logs("projector"))
}
