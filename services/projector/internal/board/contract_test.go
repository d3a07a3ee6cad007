package board

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/clock"
	"msgexchange/libs/logging"
	"msgexchange/services/internal/openapi/openapitest"
)

// TestHTTPContract_R_N7_BoardMatchesTheOpenAPIDocument: the board's page
// (at / and /board), its assets, its event stream, a malformed window and
// a stopped board answer as the OpenAPI document of the HTTP interface
// says.
func TestHTTPContract_R_N7_BoardMatchesTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	v := openapitest.New(t)
	r := &fakeReader{}
	r.set(nil, stored(15, 1, flight15))
	b, _ := startBroadcaster(t, r, BroadcasterOptions{})
	srv := newBoardServer(t, b, HandlerOptions{Retry: 2500 * time.Millisecond}, nil)

	for _, tc := range []struct {
		path string
		code int
	}{
		{"/", http.StatusOK},
		{"/board", http.StatusOK},
		{"/board/assets/board.css", http.StatusOK},
		{"/board/assets/board.js", http.StatusOK},
		{"/board/events?past=soon", http.StatusBadRequest},
	} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		require.NoError(t, err)
		resp, body := get(t, req.URL.String())
		require.Equal(t, tc.code, resp.StatusCode, "%s: %s", tc.path, body)
		v.Response(t, req, resp, []byte(body))
	}

	// The stream: its status and headers, and what it sent first.
	c := openStreamQuery(t, srv.URL, "past=1h&ahead=2h")
	select {
	case first := <-c.events:
		require.Equal(t, "2500", first.retry)
	case <-time.After(waitFor):
		t.Fatal("no event within the deadline")
	}
	v.Response(t, c.resp.Request, c.resp, []byte("retry: 2500\n\n"))

	// A board that is stopping refuses the stream with a 503.
	stopped := NewBroadcaster(&fakeReader{}, logging.Discard(), clock.Real{}, BroadcasterOptions{})
	stopped.close()
	mux := http.NewServeMux()
	NewHandler(stopped, logging.Discard(), HandlerOptions{}).Register(mux)
	req := httptest.NewRequest(http.MethodGet, "/board/events", nil)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	v.Recorded(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
}
