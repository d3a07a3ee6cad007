package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"msgexchange/libs/clip"
	"msgexchange/libs/clock"
	"msgexchange/services/ingest/internal/mailbox"
)

// Path is the route of the compat entry.
const Path = "/cminmsgs/send"

// MySQL error numbers that mean the message does not fit the mailbox.
const (
	erDataTooLong       = 1406 // ER_DATA_TOO_LONG
	erNetPacketTooLarge = 1153 // ER_NET_PACKET_TOO_LARGE
)

// Inserter stores a message in CMINMSGS; *mailbox.Mailbox implements it.
type Inserter interface {
	Insert(ctx context.Context, message string, receivedAt time.Time, status string) (int64, error)
}

// Config tunes the entry.
type Config struct {
	// MaxBody is the largest accepted request body in bytes.
	MaxBody int64
	// AllowedNetworks limits the clients that may post; empty allows all.
	AllowedNetworks []netip.Prefix
	// TrustedProxies are the peers (reverse proxies, ingress controllers)
	// whose X-Forwarded-For names the client; from any other peer the
	// header is ignored. Empty trusts none.
	TrustedProxies []netip.Prefix
	// TokenFile, when set, is a file of accepted bearer tokens, one a
	// line, read again when it changes; every request must carry
	// "Authorization: Bearer <token>". Empty requires none.
	TokenFile string
	// ValidStatus is written to CMINMSGS_STATUS.
	ValidStatus string
	// Limits bound the requests per source and in total (R-K9).
	Limits Limits
}

// Handler serves POST /cminmsgs/send.
type Handler struct {
	cfg      Config
	tokens   *tokens // nil: no token required
	ins      Inserter
	clock    clock.Clock
	wake     func()
	logger   *slog.Logger
	requests metric.Int64Counter
	limited  metric.Int64Counter
	limiter  *limiter
}

// New returns the handler. wake is called after each committed insert so
// that the scanner publishes the row without waiting for its poll interval.
func New(cfg Config, ins Inserter, clk clock.Clock, wake func(), meter metric.Meter, logger *slog.Logger) (*Handler, error) {
	requests, err := meter.Int64Counter("msgx_ingest_compat_requests_total",
		metric.WithDescription("Requests to POST /cminmsgs/send by outcome (accepted or the error code)."))
	if err != nil {
		return nil, fmt.Errorf("creating compat metrics: %w", err)
	}
	limited, err := meter.Int64Counter("msgx_ingest_compat_limited_total",
		metric.WithDescription("Requests to POST /cminmsgs/send refused by a limit (R-K9): source_rate and source_concurrency answer 429, total_rate and total_concurrency 503."))
	if err != nil {
		return nil, fmt.Errorf("creating compat metrics: %w", err)
	}
	if wake == nil {
		wake = func() {}
	}
	h := &Handler{cfg: cfg, ins: ins, clock: clk, wake: wake, logger: logger, requests: requests, limited: limited, limiter: newLimiter(cfg.Limits)}
	if cfg.TokenFile != "" {
		if h.tokens, err = loadTokens(cfg.TokenFile); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// apiError is a failure answer.
type apiError struct {
	status  int
	code    string
	message string
	cause   error // logged, never sent
	// retryAfter, when positive, is sent as Retry-After (429, 503).
	retryAfter time.Duration
}

// ServeHTTP handles one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, aerr := h.accept(w, r)
	if aerr != nil {
		h.requests.Add(r.Context(), 1, metric.WithAttributes(attribute.String("outcome", aerr.code)))
		// The message and the cause may quote the request (its
		// Content-Type, a driver error); a log line carries at most 2 KB of
		// it (R-H2).
		logErr := aerr.message
		if aerr.cause != nil {
			logErr = aerr.cause.Error()
		}
		logErr = clip.Text(logErr)
		attrs := []any{"code", aerr.code, "err", logErr, "remote", r.RemoteAddr}
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			attrs = append(attrs, "x_forwarded_for", clip.Text(strings.Join(xff, ", ")))
		}
		if aerr.status >= 500 {
			h.logger.Error("compat request failed", attrs...)
		} else {
			h.logger.Warn("compat request rejected", attrs...)
		}
		switch aerr.status {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", http.MethodPost)
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="cminmsgs"`)
		}
		if aerr.retryAfter > 0 {
			w.Header().Set("Retry-After", retryAfterSeconds(aerr.retryAfter))
		}
		writeError(w, aerr)
		return
	}
	h.requests.Add(r.Context(), 1, metric.WithAttributes(attribute.String("outcome", "accepted")))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, strconv.FormatInt(id, 10))
}

// accept validates, converts and stores the message.
func (h *Handler) accept(w http.ResponseWriter, r *http.Request) (int64, *apiError) {
	if r.Method != http.MethodPost {
		return 0, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", message: "use POST"}
	}
	if why := crossSite(r); why != "" {
		return 0, &apiError{status: http.StatusForbidden, code: "cross_site", message: "refused: " + why + "; the entry accepts requests from programs only"}
	}
	src, ok := h.source(r)
	if !ok {
		return 0, &apiError{status: http.StatusForbidden, code: "forbidden", message: "this source address may not post messages"}
	}
	// The slot is taken before the token is checked, so that guessing
	// tokens is bounded like any other request, and held until the
	// message is stored.
	release, refusal, limit := h.limiter.acquire(src, h.clock.Now())
	if refusal != nil {
		h.limited.Add(r.Context(), 1, metric.WithAttributes(attribute.String("limit", limit)))
		return 0, refusal
	}
	defer release()
	if h.tokens != nil && !h.tokens.valid(bearer(r)) {
		return 0, &apiError{status: http.StatusUnauthorized, code: "unauthorized", message: `send "Authorization: Bearer <token>" with a token of the compat entry`}
	}
	cs, err := ParseContentType(r.Header.Get("Content-Type"))
	switch {
	case errors.Is(err, ErrUnsupportedCharset):
		return 0, &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_charset", message: err.Error()}
	case err != nil:
		return 0, &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type", message: err.Error()}
	}
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
		message: fmt.Sprintf("the body exceeds the limit of %d bytes", h.cfg.MaxBody)}
	if r.ContentLength > h.cfg.MaxBody {
		return 0, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return 0, tooLarge
		}
		return 0, &apiError{status: http.StatusBadRequest, code: "unreadable_body", message: "the body could not be read completely", cause: err}
	}
	text, err := cs.ToUTF8(body)
	if err != nil {
		return 0, &apiError{status: http.StatusBadRequest, code: "invalid_encoding", message: err.Error()}
	}
	if strings.TrimSpace(string(text)) == "" {
		return 0, &apiError{status: http.StatusBadRequest, code: "empty_body", message: "the body is empty; send the raw message"}
	}
	if len(text) > mailbox.MaxMessageBytes {
		return 0, &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
			message: fmt.Sprintf("the message is %d bytes as UTF-8; the mailbox holds at most %d", len(text), mailbox.MaxMessageBytes)}
	}
	// Once the body is complete the insert is finished even if the client
	// goes away, so that a stored row is always followed by a wake-up.
	id, err := h.ins.Insert(context.WithoutCancel(r.Context()), string(text), h.clock.Now(), h.cfg.ValidStatus)
	if err != nil {
		if me := (*mysql.MySQLError)(nil); errors.As(err, &me) && (me.Number == erDataTooLong || me.Number == erNetPacketTooLarge) {
			return 0, &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
				message: "the mailbox refused the message as too large", cause: err}
		}
		return 0, &apiError{status: http.StatusServiceUnavailable, code: "mailbox_unavailable",
			message: "the message was not stored because the mailbox database is unavailable; retry later", cause: err}
	}
	h.wake()
	h.logger.Info("compat message stored", "msg_id", id, "bytes", len(text), "charset", clip.Text(cs.Name), "remote", r.RemoteAddr)
	return id, nil
}

// source returns the request's client address, the source its limits
// are counted against, and whether it may post: the address (clientAddr:
// the peer, or what a trusted proxy says in X-Forwarded-For) must be in
// AllowedNetworks when that is set. Forwarding headers from any other peer
// are set by clients and prove nothing. A peer that cannot be parsed (not
// TCP) counts as one source under its own name.
func (h *Handler) source(r *http.Request) (string, bool) {
	addr, ok := clientAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), h.cfg.TrustedProxies)
	if len(h.cfg.AllowedNetworks) == 0 {
		if !ok {
			return r.RemoteAddr, true
		}
		return addr.String(), true
	}
	if !ok || !contains(h.cfg.AllowedNetworks, addr) {
		return "", false
	}
	return addr.String(), true
}

func writeError(w http.ResponseWriter, e *apiError) {
	body, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{e.code, e.message})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}
