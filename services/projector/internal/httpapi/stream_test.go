package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/logging"
	"msgexchange/services/projector/internal/store"
	"msgexchange/services/projector/internal/store/storetest"
)

// shanghai is the airport zone of these tests.
var shanghai = func() *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return loc
}()

// hookReader is the real store with hooks that run before a page is
// read, so a test can lose or change the projection at a chosen point of
// a stream.
type hookReader struct {
	*store.Store
	mu         sync.Mutex
	pages      int
	beforePage func(n int) // n counts the pages read so far
}

func (h *hookReader) Page(ctx context.Context, l store.Listing, flids []int64) ([][]byte, error) {
	h.mu.Lock()
	n := h.pages
	h.pages++
	h.mu.Unlock()
	if h.beforePage != nil {
		h.beforePage(n)
	}
	return h.Store.Page(ctx, l, flids)
}

// streamServer serves the routes of a Handler on r over real HTTP, since a
// streamed body and an aborted transfer are only visible there.
func streamServer(t *testing.T, r Reader, opts Options) string {
	t.Helper()
	mux := http.NewServeMux()
	New(r, logging.Discard(), opts).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// fetch GETs path and reads the whole body; readErr is what reading the
// body failed with (nil for a complete transfer).
func fetch(t *testing.T, base, path string) (resp *http.Response, body string, readErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, readErr := io.ReadAll(resp.Body)
	return resp, string(b), readErr
}

// flightDoc is a stored flight-state value as the processor writes it.
func flightDoc(flid int64, day, mvin, sodt string) []byte {
	return fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":1,"state":"ACTIVE","operation_day":%q,"msg_id":1,"doc":{"FLID":"%d","FLNO":"MU%d","MVIN":%q,"SODT":%q}}`,
		flid, day, flid, flid, mvin, sodt)
}

// seed writes docs (FLID → value) and marks the projection complete.
func seed(t *testing.T, st *store.Store, docs map[int64][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	updates := make([]store.Update, 0, len(docs))
	for flid, d := range docs {
		updates = append(updates, store.Update{FLID: flid, Version: 1, Value: d})
	}
	_, err := st.Apply(ctx, updates)
	require.NoError(t, err)
	storetest.Complete(t, st)
}

// R-E2: the streamed list in version 1 is byte for byte the body the
// in-memory list produced ({"count":N,"flights":[...]} with compact,
// HTML-escaped documents sorted by FLID, and a newline), over many pages,
// and it is sent chunked rather than built whole; version 2 streams the
// same flights.
func TestHandler_R_E2_StreamedListIsByteCompatible(t *testing.T) {
	t.Parallel()
	rdb, prefix := liveRedis(t)
	st := store.New(rdb, prefix)
	docs := map[int64][]byte{}
	const n = 1234
	for i := int64(1); i <= n; i++ {
		// Stored values are verbatim Kafka values: whitespace, HTML
		// characters and line separators must come out as encoding/json
		// wrote them.
		docs[i*7] = fmt.Appendf(nil, "{ \"schema\":1, \"flid\":%d,\n \"version\":2, \"doc\":{\"RMRK\":\"<b>gate & stand</b>\u2028 %d\", \"FLNO\":\"MU%d\"} }", i*7, i, i)
	}
	seed(t, st, docs)
	base := streamServer(t, st, Options{PageSize: 100})

	resp, body, err := fetch(t, base, "/all/flights?v=1")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Equal(t, int64(-1), resp.ContentLength, "streamed, not built whole")
	require.Equal(t, []string{"chunked"}, resp.TransferEncoding)

	// What the handler wrote before it streamed: json.Marshal of the
	// whole list.
	legacy := struct {
		Count   int               `json:"count"`
		Flights []json.RawMessage `json:"flights"`
	}{Count: n}
	for i := int64(1); i <= n; i++ {
		legacy.Flights = append(legacy.Flights, docs[i*7])
	}
	want, err := json.Marshal(legacy)
	require.NoError(t, err)
	require.Equal(t, string(want)+"\n", body)
	require.Contains(t, body, `\u003cb\u003egate \u0026 stand\u003c/b\u003e\u2028`)

	// Version 2, the default, streams the same flights in the contract's
	// names, the documents escaped alike.
	_, body, err = fetch(t, base, "/all/flights")
	require.NoError(t, err)
	all := make([][]byte, 0, n)
	for i := int64(1); i <= n; i++ {
		all = append(all, docs[i*7])
	}
	require.Equal(t, `{"count":`+fmt.Sprint(n)+`,"flights":[`+items(t, nil, all...)+"]}\n", body)
	require.Contains(t, body, `\u003cb\u003egate \u0026 stand\u003c/b\u003e\u2028`)

	// An empty projection is the empty list.
	rdb2, prefix2 := liveRedis(t)
	st2 := store.New(rdb2, prefix2)
	storetest.Complete(t, st2)
	_, body, err = fetch(t, streamServer(t, st2, Options{}), "/all/flights")
	require.NoError(t, err)
	require.Equal(t, `{"count":0,"flights":[]}`+"\n", body)
}

// R-H5: once the 200 and the first flights are sent, a projection Redis
// loses (or loses and rebuilds), a listed flight deleted before its page
// is read, or a stored value that is not JSON cuts the transfer: the
// client's read fails and what arrived does not parse, so no shorter list
// ever passes for the whole one.
func TestHandler_R_H5_LossMidStreamAbortsTheTransfer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		lose func(t *testing.T, rdb *redis.Client, prefix string, st *store.Store)
	}{
		{name: "FlightsHashLost", lose: func(t *testing.T, rdb *redis.Client, prefix string, _ *store.Store) {
			require.NoError(t, rdb.Del(context.Background(), prefix+"flights").Err())
		}},
		{name: "EverythingLostAndRebuilt", lose: func(t *testing.T, rdb *redis.Client, prefix string, st *store.Store) {
			ctx := context.Background()
			all, err := rdb.HGetAll(ctx, prefix+"flights").Result()
			require.NoError(t, err)
			require.NoError(t, rdb.Del(ctx, prefix+"flights", prefix+"flight-versions").Err())
			ok, err := st.AcquireRebuildLock(ctx, "rebuild", time.Minute)
			require.NoError(t, err)
			require.True(t, ok)
			_, err = st.BeginRebuild(ctx, "rebuild")
			require.NoError(t, err)
			var updates []store.Update
			for k, v := range all {
				var flid int64
				_, err := fmt.Sscan(k, &flid)
				require.NoError(t, err)
				updates = append(updates, store.Update{FLID: flid, Version: 1, Value: []byte(v), Repair: true})
			}
			_, err = st.Apply(ctx, updates)
			require.NoError(t, err)
			fin, err := st.FinishRebuild(ctx, "rebuild", `{"by":"rebuild"}`)
			require.NoError(t, err)
			require.Equal(t, store.FinishCompleted, fin)
		}},
		{name: "ListedFlightDeleted", lose: func(t *testing.T, _ *redis.Client, _ string, st *store.Store) {
			_, err := st.Apply(context.Background(), []store.Update{{FLID: 45, Version: 2}})
			require.NoError(t, err)
		}},
		{name: "StoredValueNotJSON", lose: func(t *testing.T, rdb *redis.Client, prefix string, _ *store.Store) {
			require.NoError(t, rdb.HSet(context.Background(), prefix+"flights", "45", `{"broken`).Err())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb, prefix := liveRedis(t)
			st := store.New(rdb, prefix)
			docs := map[int64][]byte{}
			for i := int64(1); i <= 50; i++ {
				docs[i] = flightDoc(i, "2026-12-01", "A", "01DEC260800")
			}
			seed(t, st, docs)
			r := &hookReader{Store: st}
			r.beforePage = func(n int) {
				if n == 2 { // after the first two pages of 10 went out
					tc.lose(t, rdb, prefix, st)
				}
			}
			resp, body, err := fetch(t, streamServer(t, r, Options{PageSize: 10}), "/all/flights")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Error(t, err, "the transfer must break")
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			require.True(t, strings.HasPrefix(body, `{"count":50,"flights":[`), "the first pages were sent: %.60s", body)
			require.False(t, json.Valid([]byte(body)), "what arrived must not parse as a list")
		})
	}
}

// R-H5: a flight deleted between the listing and the first page leaves
// the list before anything is sent (the count is not out yet), and a
// projection lost there is a 503, not a started list.
func TestHandler_R_H5_FirstPageIsDecidedBeforeTheStatus(t *testing.T) {
	t.Parallel()
	t.Run("DeletedBeforeTheFirstByte", func(t *testing.T) {
		t.Parallel()
		rdb, prefix := liveRedis(t)
		st := store.New(rdb, prefix)
		seed(t, st, map[int64][]byte{1: doc(1), 2: doc(2), 3: doc(3)})
		r := &hookReader{Store: st, beforePage: func(n int) {
			if n == 0 {
				_, err := st.Apply(context.Background(), []store.Update{{FLID: 2, Version: 2}})
				require.NoError(t, err)
			}
		}}
		resp, body, err := fetch(t, streamServer(t, r, Options{}), "/all/flights")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, `{"count":2,"flights":[`+items(t, nil, doc(1), doc(3))+`]}`+"\n", body)
	})
	for _, path := range []string{"/all/flights", "/all/flights?movement=A"} {
		t.Run("LostBeforeTheFirstByte"+strings.ReplaceAll(path, "/", "_"), func(t *testing.T) {
			t.Parallel()
			rdb, prefix := liveRedis(t)
			st := store.New(rdb, prefix)
			seed(t, st, map[int64][]byte{1: doc(1), 2: doc(2)})
			r := &hookReader{Store: st, beforePage: func(n int) {
				if n == 0 {
					require.NoError(t, rdb.HDel(context.Background(), prefix+"flights", "1").Err())
				}
			}}
			resp, body, err := fetch(t, streamServer(t, r, Options{}), path)
			require.NoError(t, err)
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			require.Contains(t, body, `"projection_rebuilding"`)
		})
	}
}

// filterFixture is a projection of flights over two operation days, both
// movements, and SODTs in both documented forms (a leaf and an element
// with attributes), plus one whose SODT does not parse.
func filterFixture() map[int64][]byte {
	return map[int64][]byte{
		1: flightDoc(1, "2026-12-01", "A", "01DEC260010"),
		2: flightDoc(2, "2026-12-01", "D", "01DEC260800"),
		3: flightDoc(3, "2026-12-01", "A", "01DEC261559"),
		4: flightDoc(4, "2026-12-01", "D", "01DEC261600"),
		5: flightDoc(5, "2026-12-02", "A", "02DEC260930"),
		6: []byte(`{"schema":1,"flid":6,"version":3,"operation_day":"2026-12-02","doc":{"MVIN":{"@X":"1","#text":"D"},"SODT":{"@TZ":"L","#text":"02DEC262359"}}}`),
		7: flightDoc(7, "2026-12-02", "A", "not a time"),
		8: []byte(`{"schema":1,"flid":8,"version":1,"doc":{"MVIN":"A","SODT":"01DEC261200"}}`),
	}
}

// R-E2: GET /all/flights filters by operation day, movement and a
// scheduled-time window [from, to) given as instants with offsets, read
// in the airport zone; filters combine; the shape and FLID order stay.
// A selection kept in memory and one read a second time while streaming
// answer the same bytes.
func TestHandler_R_E2_Filters(t *testing.T) {
	t.Parallel()
	rdb, prefix := liveRedis(t)
	st := store.New(rdb, prefix)
	docs := filterFixture()
	seed(t, st, docs)
	buffered := streamServer(t, st, Options{Zone: shanghai, PageSize: 3})
	reread := streamServer(t, st, Options{Zone: shanghai, PageSize: 3, BufferBytes: 1})
	tests := []struct {
		query string
		want  []int64
	}{
		{"day=2026-12-01", []int64{1, 2, 3, 4}},
		{"day=2026-12-02", []int64{5, 6, 7}},
		{"day=2026-12-03", nil},
		{"movement=A", []int64{1, 3, 5, 7, 8}},
		{"movement=d", []int64{2, 4, 6}},
		// 08:00+08:00 is 00:00Z; 16:00 Shanghai is 08:00Z: [08:00, 16:00).
		{"from=" + url.QueryEscape("2026-12-01T08:00:00+08:00") + "&to=2026-12-01T08:00:00Z", []int64{2, 3, 8}},
		{"from=2026-12-01T00:00Z&to=2026-12-01T08:00:01Z", []int64{2, 3, 4, 8}},
		{"from=" + url.QueryEscape("2026-12-02T00:00+08:00"), []int64{5, 6}},
		{"to=" + url.QueryEscape("2026-12-01T00:10:00+08:00"), nil},
		{"to=" + url.QueryEscape("2026-12-01T00:11:00+08:00"), []int64{1}},
		{"day=2026-12-01&movement=D&from=" + url.QueryEscape("2026-12-01T12:00+08:00"), []int64{4}},
		{"movement=D&day=2026-12-02", []int64{6}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			selected := make([][]byte, 0, len(tc.want))
			for _, flid := range tc.want {
				selected = append(selected, docs[flid])
			}
			want := `{"count":` + fmt.Sprint(len(tc.want)) + `,"flights":[` + items(t, shanghai, selected...) + "]}\n"
			for _, base := range []string{buffered, reread} {
				resp, body, err := fetch(t, base, "/all/flights?"+tc.query)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode, body)
				require.Equal(t, want, body)
			}
		})
	}
}

// R-E2: a bad filter is a 400 with a JSON error that names the parameter
// and what it expects, never the whole list.
func TestHandler_R_E2_BadFilterIs400(t *testing.T) {
	t.Parallel()
	rdb, prefix := liveRedis(t)
	st := store.New(rdb, prefix)
	seed(t, st, filterFixture())
	base := streamServer(t, st, Options{Zone: shanghai})
	tests := []struct {
		query, mention string
	}{
		{"movment=A", `unknown query parameter "movment"`},
		{"day=2026-12-01&day=2026-12-02", `"day" given 2 times`},
		{"day=01DEC26", "YYYY-MM-DD"},
		{"day=", "YYYY-MM-DD"},
		{"day=2026-02-30", "YYYY-MM-DD"},
		{"movement=X", "A (arrivals) or D (departures)"},
		{"movement=", "A (arrivals) or D (departures)"},
		{"from=2026-12-01T08:00:00", "with a zone offset"},
		{"from=2026-12-01T08:00:00+08:00", "%2B"}, // an unescaped + is a space
		{"to=tomorrow", "ISO-8601"},
		{"from=2026-12-01T08:00Z&to=2026-12-01T08:00Z", "is not before"},
		{"from=2026-12-02T08:00Z&to=2026-12-01T08:00Z", "is not before"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			resp, body, err := fetch(t, base, "/all/flights?"+tc.query)
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var e errorResponse
			require.NoError(t, json.Unmarshal([]byte(body), &e))
			require.Equal(t, "invalid_parameter", e.Error)
			require.Contains(t, e.Message, tc.mention)
		})
	}
}
