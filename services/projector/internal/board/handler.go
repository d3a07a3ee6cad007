package board

import (
	"context"
	"embed"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"msgexchange/services/projector/internal/store"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows only the board's own files and stream: no
// inline script or style, nothing from another origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// HandlerOptions tune the Handler; zero values take the defaults.
type HandlerOptions struct {
	// Heartbeat is the period of the comment lines that keep an idle stream
	// open through proxies and reveal a vanished client; default 15s.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a stream; a client that does not
	// take an event within it is dropped (it reconnects); default 10s.
	WriteTimeout time.Duration
	// Retry is the reconnection delay the stream asks the browser to use;
	// default 3s.
	Retry time.Duration
	// Complete, when set, is asked before a stream opens: while it reports
	// store.ErrIncomplete (Redis lost the projection and it is being
	// rebuilt, R-H5) the stream answers 503 instead of a list. Other
	// errors (Redis unreachable) open the stream, which then reports the
	// projection unavailable with the last list, as during any outage.
	Complete func(ctx context.Context) error
	// CheckTimeout bounds one call of Complete; default 5s.
	CheckTimeout time.Duration
	// Window is the window of a board whose URL asks for none, rounded up
	// as every window is; default the last 2 hours to the next 12.
	Window Window
	// MaxStreams caps the open board streams of the process and
	// MaxStreamsPerClient those of one client address (R-K5): a stream
	// beyond either is refused with 503, so that no number of boards can
	// exhaust the projector's memory or file descriptors; defaults 1,000
	// and 20.
	MaxStreams          int
	MaxStreamsPerClient int
}

func (o HandlerOptions) withDefaults() HandlerOptions {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = 3 * time.Second
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 5 * time.Second
	}
	if o.Window == (Window{}) {
		o.Window = Window{Past: 2 * time.Hour, Ahead: 12 * time.Hour}
	}
	o.Window = roundWindow(o.Window)
	if o.MaxStreams <= 0 {
		o.MaxStreams = 1000
	}
	if o.MaxStreamsPerClient <= 0 {
		o.MaxStreamsPerClient = 20
	}
	return o
}

// Handler serves the board page, its assets and its event stream.
type Handler struct {
	bc     *Broadcaster
	logger *slog.Logger
	opts   HandlerOptions

	mu        sync.Mutex
	shutdowns map[*http.Server]chan struct{}
	streams   int            // open streams
	clients   map[string]int // open streams by client address
}

// NewHandler returns a Handler streaming bc's frames.
func NewHandler(bc *Broadcaster, logger *slog.Logger, opts HandlerOptions) *Handler {
	return &Handler{
		bc:        bc,
		logger:    logger.With("component", "projector-board-http"),
		opts:      opts.withDefaults(),
		shutdowns: make(map[*http.Server]chan struct{}),
		clients:   make(map[string]int),
	}
}

// admit takes a stream slot for client, or reports which cap refuses it.
func (h *Handler) admit(client string) (release func(), refusal string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.streams >= h.opts.MaxStreams:
		return nil, "the flight board serves its maximum of " + strconv.Itoa(h.opts.MaxStreams) + " open boards; retry later"
	case h.clients[client] >= h.opts.MaxStreamsPerClient:
		return nil, "this address has its maximum of " + strconv.Itoa(h.opts.MaxStreamsPerClient) + " open flight boards; close one"
	}
	h.streams++
	h.clients[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.streams--
			if h.clients[client]--; h.clients[client] <= 0 {
				delete(h.clients, client)
			}
		})
	}, ""
}

// clientOf is the address a stream counts against: the peer's IP (a
// reverse proxy in front of the projector counts as one client, so its cap
// is set for that).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Register adds GET / and GET /board (the page), GET /board/assets/board.css
// and GET /board/assets/board.js, and GET /board/events (the stream) to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	page := h.asset("assets/index.html", "text/html; charset=utf-8")
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /board", page)
	mux.Handle("GET /board/assets/board.css", h.asset("assets/board.css", "text/css; charset=utf-8"))
	mux.Handle("GET /board/assets/board.js", h.asset("assets/board.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /board/events", h.events)
}

// asset serves one embedded file. The files are small and change only with
// the binary, so browsers revalidate them (no-cache) rather than cache
// blindly across an upgrade.
func (h *Handler) asset(name, contentType string) http.Handler {
	body, err := assets.ReadFile(name)
	if err != nil {
		// The names are fixed and embedded at build time.
		panic("board: embedded asset missing: " + name)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hd := w.Header()
		hd.Set("Content-Type", contentType)
		hd.Set("Cache-Control", "no-cache")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(body)
	})
}

// events streams the board's frames until the client leaves, the server
// shuts down or the broadcaster stops. The query may ask for another
// window than the default (past=1h&ahead=6h); a bad one is a 400 whose
// text the page shows.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	win, err := parseWindow(q.Get("past"), q.Get("ahead"), h.opts.Window)
	if err != nil {
		http.Error(w, "bad flight board window: "+err.Error(), http.StatusBadRequest)
		return
	}
	if h.opts.Complete != nil {
		ctx, cancel := context.WithTimeout(r.Context(), h.opts.CheckTimeout)
		err := h.opts.Complete(ctx)
		cancel()
		if errors.Is(err, store.ErrIncomplete) {
			// The page reconnects by itself after an error status.
			w.Header().Set("Retry-After", "5")
			http.Error(w, "Redis lost the flight projection; it is being rebuilt from PostgreSQL; retry in a few seconds", http.StatusServiceUnavailable)
			return
		}
	}
	release, refusal := h.admit(clientOf(r))
	if release == nil {
		h.logger.Warn("flight board stream refused", "client", clientOf(r), "reason", refusal)
		w.Header().Set("Retry-After", "30")
		http.Error(w, refusal, http.StatusServiceUnavailable)
		return
	}
	defer release()
	frames, cancel, err := h.bc.Subscribe(win)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "the flight board is stopping; retry later", http.StatusServiceUnavailable)
		return
	}
	defer cancel()
	// The server's write timeout counts from the request's start and would
	// cut the stream; each write sets its own deadline instead.
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // let reverse proxies pass events at once
	w.WriteHeader(http.StatusOK)
	if !h.write(rc, w, []byte("retry: "+strconv.FormatInt(h.opts.Retry.Milliseconds(), 10)+"\n\n")) {
		return
	}
	stop := h.shutdownSignal(r)
	heartbeat := time.NewTicker(h.opts.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-stop:
			return
		case frame, ok := <-frames:
			if !ok || !h.write(rc, w, frame) {
				return
			}
		case <-heartbeat.C:
			if !h.write(rc, w, []byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}

// write sends p and flushes it within the write timeout; false ends the
// stream.
func (h *Handler) write(rc *http.ResponseController, w http.ResponseWriter, p []byte) bool {
	if err := rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return false
	}
	if _, err := w.Write(p); err != nil {
		return false
	}
	if err := rc.Flush(); err != nil {
		h.logger.Debug("flushing board event failed", "err", err)
		return false
	}
	return true
}

// shutdownSignal returns a channel closed when the request's server begins
// shutting down (nil, which never fires, outside an http.Server). The hook
// is registered once per server.
func (h *Handler) shutdownSignal(r *http.Request) <-chan struct{} {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.shutdowns[srv]
	if !ok {
		ch = make(chan struct{})
		h.shutdowns[srv] = ch
		srv.RegisterOnShutdown(func() { close(ch) })
	}
	return ch
}
