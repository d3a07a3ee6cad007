// Package otlptest runs an in-process OTLP trace receiver (gRPC, and
// HTTP on request) on a loopback port for one test: it implements the collector's TraceService,
// keeps every span it is sent, and lets the test wait for the spans it
// expects instead of sleeping.
package otlptest

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for assertions.
type Span struct {
	// Service is the resource's service.name.
	Service string
	// Resource holds the resource's attributes as text.
	Resource map[string]string
	// Scope is the instrumentation scope (tracer) name.
	Scope   string
	Name    string
	TraceID string // 32 lower-case hex digits
	SpanID  string // 16 lower-case hex digits
	// ParentID is the parent span's ID, "" for a root span.
	ParentID string
	// Attrs holds the string, integer and boolean attributes as text.
	Attrs map[string]string
}

// Receiver is a running trace receiver.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	// Endpoint is the host:port exporters send to (plaintext gRPC).
	Endpoint string

	mu       sync.Mutex
	spans    []Span
	requests int
	changed  chan struct{}
}

// Start listens on 127.0.0.1 and serves until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for OTLP: %v", err)
	}
	r := &Receiver{Endpoint: ln.Addr().String(), changed: make(chan struct{})}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return r
}

// StartHTTP serves OTLP/HTTP (protobuf, POST /v1/traces) as well until
// the test ends, and returns its base URL (http://host:port).
func (r *Receiver) StartHTTP(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var in collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &in)
		}
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, fmt.Sprintf("want POST /v1/traces with an ExportTraceServiceRequest: %v", err), http.StatusBadRequest)
			return
		}
		out, _ := r.Export(req.Context(), &in)
		b, _ := proto.Marshal(out)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Export implements the collector's TraceService.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		service := res["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					Service: service, Resource: res, Scope: ss.GetScope().GetName(), Name: sp.GetName(),
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					Attrs: attrs(sp.GetAttributes()),
				}
				if len(sp.GetParentSpanId()) > 0 {
					s.ParentID = hex.EncodeToString(sp.GetParentSpanId())
				}
				got = append(got, s)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.requests++
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests returns the number of export requests received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// WaitFor waits until cond holds for the spans received so far, or the
// timeout passes; it reports whether cond held.
func (r *Receiver) WaitFor(timeout time.Duration, cond func([]Span) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans := append([]Span(nil), r.spans...)
		changed := r.changed
		r.mu.Unlock()
		if cond(spans) {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			if x.BoolValue {
				out[kv.GetKey()] = "true"
			} else {
				out[kv.GetKey()] = "false"
			}
		}
	}
	return out
}
