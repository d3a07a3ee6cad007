package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/klauspost/compress/gzhttp"

	"msgexchange/services/internal/openapi"
	"msgexchange/services/projector/internal/store"
)

// Reader reads the projection; store.Store implements it.
type Reader interface {
	List(ctx context.Context) (store.Listing, error)
	Page(ctx context.Context, l store.Listing, flids []int64) ([][]byte, error)
	Get(ctx context.Context, flid int64) (json.RawMessage, error)
	// VersionsOf returns the version of each FLID (-1 for none), reading
	// no documents: the entity tag of a list.
	VersionsOf(ctx context.Context, flids []int64) ([]int64, error)
}

// Options tune the Handler; zero values take the defaults.
type Options struct {
	// Timeout bounds each Redis read (the listing, one page, one flight);
	// default 5s. A streamed list makes one read per page, so the whole
	// response may take longer.
	Timeout time.Duration
	// Zone is the airport's time zone, in which the scheduled times (SODT)
	// are read for the from and to filters; default UTC.
	Zone *time.Location
	// PageSize is the number of flights read from Redis and written (then
	// flushed) at a time while streaming GET /all/flights; default 500.
	PageSize int
	// BufferBytes bounds the documents a filtered list keeps from its
	// selecting pass; a selection larger than that is read from Redis a
	// second time while it is streamed; default 4 MiB.
	BufferBytes int
	// Age, when set, tells how old the projection is (R-N1); every answer
	// carries it as AgeHeader, in whole seconds, once it is known.
	Age func() (time.Duration, bool)
}

// AgeHeader names the response header with the projection's age in whole
// seconds: how long ago the projection last held every record of
// msgx.flight-state. It grows while the projector lags or the brokers
// cannot be reached, while the list keeps being served (R-N1).
const AgeHeader = "X-Projection-Age"

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Zone == nil {
		o.Zone = time.UTC
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = 4 << 20
	}
	return o
}

// Handler serves the projection's HTTP routes.
type Handler struct {
	reader Reader
	logger *slog.Logger
	opts   Options
}

// New returns a Handler reading from r.
func New(r Reader, logger *slog.Logger, opts Options) *Handler {
	return &Handler{reader: r, logger: logger.With("component", "projector-http"), opts: opts.withDefaults()}
}

// Register adds GET /all/flights, GET /flights/{flid} and the OpenAPI
// document of the HTTP interface (openapi.Path) to mux. Responses are gzip-compressed for a
// client that accepts it (klauspost/compress gzhttp: only with
// Accept-Encoding gzip, only bodies of 1 KiB or more, Vary set), the
// streamed list included: each flushed page leaves as a compressed chunk.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("GET /all/flights", gzhttp.GzipHandler(h.withAge(h.allFlights)))
	mux.Handle("GET /flights/{flid}", gzhttp.GzipHandler(h.withAge(h.flight)))
	mux.Handle("GET "+openapi.Path, gzhttp.GzipHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if notModified(w, r, docETag(openapi.Document)) {
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openapi.Document)
	})))
}

// withAge sets AgeHeader before next answers.
func (h *Handler) withAge(next http.HandlerFunc) http.HandlerFunc {
	if h.opts.Age == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if age, ok := h.opts.Age(); ok {
			w.Header().Set(AgeHeader, strconv.FormatInt(int64(age/time.Second), 10))
		}
		next(w, r)
	}
}

// errorResponse is the body of every error.
type errorResponse struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func (h *Handler) flight(w http.ResponseWriter, r *http.Request) {
	flid, err := strconv.ParseInt(r.PathValue("flid"), 10, 64)
	if err != nil || flid < 0 {
		h.writeJSON(w, http.StatusBadRequest, errorResponse{
			Error: "invalid_flid", Message: "the FLID in the path must be a non-negative decimal integer",
		})
		return
	}
	for name := range r.URL.Query() {
		if name != paramVersion {
			h.writeJSON(w, http.StatusBadRequest, errorResponse{
				Error: "invalid_parameter", Message: fmt.Sprintf("unknown query parameter %q; GET /flights/{flid} takes v", name),
			})
			return
		}
	}
	ver, err := h.version(w, r)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	defer cancel()
	doc, err := h.reader.Get(ctx, flid)
	switch {
	case errors.Is(err, store.ErrNotFound):
		h.writeJSON(w, http.StatusNotFound, errorResponse{
			Error: "flight_not_found", Message: "no current flight " + strconv.FormatInt(flid, 10) + " in the projection (never projected or deleted)",
		})
	case err != nil:
		h.unavailable(w, err)
	default:
		var item bytes.Buffer
		if err := appendItem(&item, doc, ver, h.opts.Zone); err != nil {
			h.logger.Error("a stored flight is not a flight-state JSON object; rebuild the projection", "flid", flid, "err", err)
			h.writeJSON(w, http.StatusInternalServerError, errorResponse{Error: "internal", Message: "the stored projection could not be encoded; rebuild the projection"})
			return
		}
		if notModified(w, r, docETag(item.Bytes())) {
			return
		}
		item.WriteByte('\n')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(item.Bytes())
	}
}

// version reads the item version of a request (the v parameter) and, for
// version 1, announces its deprecation in the headers. A bad v is answered
// with a 400 here and returned as the error.
func (h *Handler) version(w http.ResponseWriter, r *http.Request) (apiVersion, error) {
	v, err := parseVersion(r.URL.Query())
	if err != nil {
		h.writeJSON(w, http.StatusBadRequest, errorResponse{Error: "invalid_parameter", Message: err.Error()})
		return 0, err
	}
	if v == apiV1 {
		announceDeprecation(w.Header(), r)
	}
	return v, nil
}

// unavailable answers 503: the projection cannot be read now, or Redis
// lost it and it is being rebuilt from PostgreSQL (R-H5). Either way the
// flights are not lost, and no list is better than an empty or partial
// one.
func (h *Handler) unavailable(w http.ResponseWriter, err error) {
	resp := errorResponse{
		Error:   "projection_unavailable",
		Message: "the flight projection cannot be read from Redis right now; retry later (the data is not lost)",
	}
	if errors.Is(err, store.ErrIncomplete) {
		h.logger.Debug("refusing to serve an incomplete flight projection", "err", err)
		resp = errorResponse{
			Error:   "projection_rebuilding",
			Message: "Redis lost the flight projection (or part of it); the projector is rebuilding it from PostgreSQL, retry in a few seconds (the data is not lost)",
		}
	} else {
		h.logger.Warn("reading the flight projection failed", "err", err)
	}
	w.Header().Set("Retry-After", "5")
	h.writeJSON(w, http.StatusServiceUnavailable, resp)
}

func (h *Handler) writeJSON(w http.ResponseWriter, status int, v any) {
	// Encode before writing the status, so that a document that is not
	// valid JSON turns into a 500 instead of a truncated 200.
	body, err := json.Marshal(v)
	if err != nil {
		h.logger.Error("encoding response failed", "err", err)
		body, _ = json.Marshal(errorResponse{Error: "internal", Message: "the stored projection could not be encoded; rebuild the projection"})
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
