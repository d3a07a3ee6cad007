package board

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
	"msgexchange/services/projector/internal/store"
)

// sseEvent is one event or comment read from a stream.
type sseEvent struct {
	event   string
	data    string
	retry   string
	comment string
}

// sseClient reads a board stream in the background.
type sseClient struct {
	resp   *http.Response
	events chan sseEvent
	done   chan struct{} // closed when the stream ended
}

func openStream(t *testing.T, url string) *sseClient {
	t.Helper()
	return openStreamQuery(t, url, "")
}

// openStreamQuery opens the stream with a query ("past=1h").
func openStreamQuery(t *testing.T, url, query string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if query != "" {
		query = "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/board/events"+query, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	c := &sseClient{resp: resp, events: make(chan sseEvent, 1024), done: make(chan struct{})}
	go c.read()
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
		<-c.done
	})
	return c
}

func (c *sseClient) read() {
	defer close(c.done)
	sc := bufio.NewScanner(c.resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			c.events <- ev
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			ev.comment = strings.TrimSpace(strings.TrimPrefix(line, ":"))
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "retry: "):
			ev.retry = strings.TrimPrefix(line, "retry: ")
		}
	}
}

// nextFrame waits for the next "flights" or "changes" event, skipping
// comments, and returns it as the frame the broadcaster made.
func (c *sseClient) nextFrame(t *testing.T) []byte {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case ev := <-c.events:
			if ev.event != "flights" && ev.event != "changes" {
				continue
			}
			return []byte("event: " + ev.event + "\ndata: " + ev.data + "\n\n")
		case <-c.done:
			t.Fatal("stream ended")
		case <-deadline:
			t.Fatal("no board event within the deadline")
		}
	}
}

// nextFlights waits for the next event, which must be a whole list.
func (c *sseClient) nextFlights(t *testing.T) Snapshot {
	t.Helper()
	return decodeSnapshot(t, c.nextFrame(t))
}

// ended waits until the server ended the stream.
func (c *sseClient) ended(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(waitFor):
		t.Fatal("stream still open")
	}
}

func newBoardServer(t *testing.T, b *Broadcaster, opts HandlerOptions, configure func(*http.Server)) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	NewHandler(b, logging.Discard(), opts).Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// R-E3: the page is served at / and /board, with its assets, all embedded
// and restricted to the board's own origin.
func TestHandler_R_E3_ServesPageAndAssets(t *testing.T) {
	t.Parallel()
	srv := newBoardServer(t, NewBroadcaster(&fakeReader{}, logging.Discard(), clock.Real{}, BroadcasterOptions{}), HandlerOptions{}, nil)
	tests := []struct {
		path        string
		contentType string
		contains    []string
	}{
		{path: "/", contentType: "text/html; charset=utf-8", contains: []string{`<table id="flights"`, `src="board/assets/board.js"`, `aria-live="assertive"`}},
		{path: "/board", contentType: "text/html; charset=utf-8", contains: []string{`<table id="flights"`, `href="board/assets/board.css"`}},
		{path: "/board/assets/board.js", contentType: "text/javascript; charset=utf-8", contains: []string{"new EventSource(streamURL())", "'board/events'"}},
		{path: "/board/assets/board.css", contentType: "text/css; charset=utf-8", contains: []string{".banner"}},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			resp, body := get(t, srv.URL+tc.path)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, tc.contentType, resp.Header.Get("Content-Type"))
			require.Equal(t, contentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			for _, s := range tc.contains {
				require.Contains(t, body, s)
			}
			require.NotContains(t, body, "http://", "no external resources")
			require.NotContains(t, body, "https://", "no external resources")
		})
	}
	t.Run("OtherPathsAreNotTheBoard", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/nope", "/board/", "/board/assets/index.html"} {
			resp, _ := get(t, srv.URL+p)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, p)
		}
	})
	t.Run("OnlyGET", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Post(srv.URL+"/board", "text/plain", nil)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	})
}

// R-E3: the stream is an SSE response that first sets the reconnection
// delay, then sends the current list and every change.
func TestHandler_R_E3_StreamsListAndChanges(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	srv := newBoardServer(t, b, HandlerOptions{Retry: 2500 * time.Millisecond}, nil)

	c := openStream(t, srv.URL)
	require.Equal(t, http.StatusOK, c.resp.StatusCode)
	require.Equal(t, "text/event-stream", c.resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", c.resp.Header.Get("Cache-Control"))
	select {
	case first := <-c.events:
		require.Equal(t, "2500", first.retry, "the stream starts with the reconnection delay")
	case <-time.After(waitFor):
		t.Fatal("no event within the deadline")
	}
	var m model
	require.Equal(t, "flights", m.apply(t, c.nextFrame(t)))
	require.Equal(t, map[int64]int64{15: 1}, m.versions())

	r.set(nil, stored(15, 2, flight15), stored(16, 1, `{"FLNO":"YG9061"}`))
	b.Notify()
	require.Equal(t, "changes", m.apply(t, c.nextFrame(t)))
	require.Equal(t, map[int64]int64{15: 2, 16: 1}, m.versions())

	r.set(errRedisDown)
	b.Notify()
	require.Equal(t, "changes", m.apply(t, c.nextFrame(t)))
	require.False(t, m.meta.Available)
	require.Len(t, m.rows, 2)
}

// R-E3: the stream's query chooses the window; a bad one is a 400 whose
// text names the parameter (the page shows it instead of retrying).
func TestHandler_R_E3_WindowFromTheQuery(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(16, 1, flight16), stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	srv := newBoardServer(t, b, HandlerOptions{Window: Window{Past: 0, Ahead: time.Hour}}, nil)

	snap := openStream(t, srv.URL).nextFlights(t)
	require.Empty(t, snap.Flights, "the configured window: 04:00-05:00 holds neither flight")
	require.Equal(t, "2021-01-23T05:00", snap.To)

	snap = openStreamQuery(t, srv.URL, "past=1h&ahead=2h").nextFlights(t)
	require.Equal(t, []string{"YG9061", "YG9028"}, []string{snap.Flights[0].FLNO, snap.Flights[1].FLNO})
	require.Equal(t, "2021-01-23T03:00", snap.From)

	for _, q := range []string{"past=-1h", "ahead=8d", "ahead=12", "past=soon"} {
		resp, body := get(t, srv.URL+"/board/events?"+q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Contains(t, body, "bad flight board window", q)
	}
}

// A stream outlives the server's read and write timeouts (the process's
// HTTP server has both) and keeps sending heartbeats and changes.
func TestHandler_StreamOutlivesServerTimeouts(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	srv := newBoardServer(t, b, HandlerOptions{Heartbeat: 20 * time.Millisecond}, func(s *http.Server) {
		s.ReadTimeout = 100 * time.Millisecond
		s.WriteTimeout = 100 * time.Millisecond
	})
	c := openStream(t, srv.URL)
	c.nextFlights(t)
	started := time.Now()
	heartbeats := 0
	for time.Since(started) < 400*time.Millisecond || heartbeats < 3 {
		select {
		case ev := <-c.events:
			if ev.comment == "keep-alive" {
				heartbeats++
			}
		case <-c.done:
			t.Fatalf("stream ended after %s", time.Since(started))
		case <-time.After(waitFor):
			t.Fatal("no heartbeat within the deadline")
		}
	}
	r.set(nil, stored(15, 2, flight15))
	b.Notify()
	require.Equal(t, int64(2), decodeChanges(t, c.nextFrame(t)).Upsert[0].Version)
}

// Shutting the server down ends open streams at once, so a projector stops
// promptly while boards are open; their browsers reconnect.
func TestHandler_ServerShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil)
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	srv := newBoardServer(t, b, HandlerOptions{}, nil)
	c1, c2 := openStream(t, srv.URL), openStream(t, srv.URL)
	c1.nextFlights(t)
	c2.nextFlights(t)

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, srv.Config.Shutdown(ctx), "shutdown must not wait for the streams")
	c1.ended(t)
	c2.ended(t)
}

// A board that goes away is unsubscribed.
func TestHandler_ClientLeavingUnsubscribes(t *testing.T) {
	t.Parallel()
	b, _ := startBroadcaster(t, &fakeReader{}, BroadcasterOptions{})
	srv := newBoardServer(t, b, HandlerOptions{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/board/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Eventually(t, b.watched, waitFor, 5*time.Millisecond)
	cancel()
	_ = resp.Body.Close()
	require.Eventually(t, func() bool { return !b.watched() }, waitFor, 5*time.Millisecond)
}

// A stopped broadcaster answers 503, which makes the browser retry later.
func TestHandler_StoppedBroadcasterIs503(t *testing.T) {
	t.Parallel()
	b := NewBroadcaster(&fakeReader{}, logging.Discard(), clock.Real{}, BroadcasterOptions{})
	b.close()
	rec := httptest.NewRecorder()
	mux := http.NewServeMux()
	NewHandler(b, logging.Discard(), HandlerOptions{}).Register(mux)
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/board/events", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
}

// R-H5: a board stream asked for while Redis lost the projection answers
// 503 (the page retries by itself); a Redis that cannot be read at all
// still opens the stream, which reports the outage with the last list.
func TestHandler_R_H5_StreamRefusedWhileProjectionIsIncomplete(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	var mu sync.Mutex
	var state error
	srv := newBoardServer(t, b, HandlerOptions{Complete: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return state
	}}, nil)
	set := func(err error) {
		mu.Lock()
		state = err
		mu.Unlock()
	}

	set(fmt.Errorf("checking: %w", store.ErrIncomplete))
	resp, body := get(t, srv.URL+"/board/events")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Contains(t, body, "being rebuilt from PostgreSQL")
	page, _ := get(t, srv.URL+"/board")
	require.Equal(t, http.StatusOK, page.StatusCode, "the page itself loads and retries the stream")

	set(errRedisDown)
	c := openStream(t, srv.URL)
	require.Equal(t, http.StatusOK, c.resp.StatusCode)
	require.True(t, c.nextFlights(t).Available, "the reader answered; the check's outage is not a loss")

	set(nil)
	c2 := openStream(t, srv.URL)
	require.Equal(t, http.StatusOK, c2.resp.StatusCode)
	snap := c2.nextFlights(t)
	require.True(t, snap.Available)
	require.Equal(t, 1, snap.Count)
}
