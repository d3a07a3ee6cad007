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
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/board/events", nil)
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

// nextFlights waits for the next "flights" event, skipping comments.
func (c *sseClient) nextFlights(t *testing.T) Snapshot {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case ev := <-c.events:
			if ev.event != "flights" {
				continue
			}
			return decodeFrame(t, []byte("event: flights\ndata: "+ev.data+"\n\n"))
		case <-c.done:
			t.Fatal("stream ended")
		case <-deadline:
			t.Fatal("no flights event within the deadline")
		}
	}
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
		{path: "/board/assets/board.js", contentType: "text/javascript; charset=utf-8", contains: []string{"new EventSource('board/events')"}},
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
	b := startBroadcaster(t, r, BroadcasterOptions{})
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
	require.Equal(t, map[int64]int64{15: 1}, versions(c.nextFlights(t)))

	r.set(nil, stored(15, 2, flight15), stored(16, 1, `{"FLNO":"YG9061"}`))
	b.Notify()
	require.Equal(t, map[int64]int64{15: 2, 16: 1}, versions(c.nextFlights(t)))

	r.set(errRedisDown)
	b.Notify()
	down := c.nextFlights(t)
	require.False(t, down.Available)
	require.Len(t, down.Flights, 2)
}

// A stream outlives the server's read and write timeouts (the process's
// HTTP server has both) and keeps sending heartbeats and changes.
func TestHandler_StreamOutlivesServerTimeouts(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b := startBroadcaster(t, r, BroadcasterOptions{})
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
	require.Equal(t, map[int64]int64{15: 2}, versions(c.nextFlights(t)))
}

// Shutting the server down ends open streams at once, so a projector stops
// promptly while boards are open; their browsers reconnect.
func TestHandler_ServerShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	r := &fakeReader{}
	b := startBroadcaster(t, r, BroadcasterOptions{})
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
	b := startBroadcaster(t, &fakeReader{}, BroadcasterOptions{})
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
	b := startBroadcaster(t, r, BroadcasterOptions{})
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
