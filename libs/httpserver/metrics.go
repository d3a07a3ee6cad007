package httpserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument wraps handler (normally the process's ServeMux) so that every
// request is counted and timed:
//
//	msgx_http_requests_total{route, method, code}
//	msgx_http_request_duration_seconds{route, method, code}
//	msgx_http_requests_in_flight
//
// route is the ServeMux pattern that served the request without its
// method ("/metrics", "/flights/{flid}"), or "unmatched", so the label has
// as many values as the process has routes, never one per URL. method is
// one of the standard methods or "other". Durations are measured on the
// wall clock: they are telemetry, not logic.
func Instrument(handler http.Handler, meter metric.Meter) (http.Handler, error) {
	requests, err := meter.Int64Counter("msgx_http_requests_total",
		metric.WithDescription("HTTP requests served, by route, method and status code."))
	if err != nil {
		return nil, fmt.Errorf("creating http metrics: %w", err)
	}
	duration, err := meter.Float64Histogram("msgx_http_request_duration_seconds", metric.WithUnit("s"),
		metric.WithDescription("Time to serve one HTTP request, by route, method and status code."))
	if err != nil {
		return nil, fmt.Errorf("creating http metrics: %w", err)
	}
	inFlight, err := meter.Int64UpDownCounter("msgx_http_requests_in_flight",
		metric.WithDescription("HTTP requests being served."))
	if err != nil {
		return nil, fmt.Errorf("creating http metrics: %w", err)
	}
	inFlight.Add(context.Background(), 0)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := r.Context()
		inFlight.Add(ctx, 1)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			inFlight.Add(ctx, -1)
			// ServeMux sets the matched pattern on the request it was given.
			attrs := metric.WithAttributes(
				attribute.String("route", route(r.Pattern)),
				attribute.String("method", method(r.Method)),
				attribute.String("code", strconv.Itoa(sw.status())))
			requests.Add(ctx, 1, attrs)
			duration.Record(ctx, time.Since(start).Seconds(), attrs)
		}()
		handler.ServeHTTP(sw, r)
	}), nil
}

// route is a ServeMux pattern without its method and host.
func route(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = strings.TrimSpace(pattern[i+1:])
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:]
	}
	return pattern
}

func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusWriter remembers the status code written. Unwrap lets
// http.ResponseController reach the connection's Flusher and deadlines.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes streaming responses through.
func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// status is the code sent; a handler that wrote nothing sent 200.
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
