package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/libs/logging"
	"msgexchange/libs/redisutil"
	"msgexchange/libs/testutil/redistest"
	"msgexchange/services/projector/internal/store"
	"msgexchange/services/projector/internal/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type testBundle struct {
	store *store.Store
	mux   *http.ServeMux
}

func setup(t *testing.T, rdb *redis.Client, prefix string) *testBundle {
	t.Helper()
	st := store.New(rdb, prefix)
	mux := http.NewServeMux()
	New(st, logging.Discard(), Options{Timeout: 5 * time.Second}).Register(mux)
	return &testBundle{store: st, mux: mux}
}

func liveRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	prefix := redistest.NewPrefix(t)
	rdb, err := redisutil.New(redisutil.Config{URL: redistest.URL()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, prefix
}

func (b *testBundle) get(path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	b.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func doc(flid int64) []byte {
	return fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":1,"doc":{"FLNO":"CA%d"}}`, flid, flid)
}

// items is what the list (or one flight) says for stored values in the
// default item version, the airport in zone (nil: UTC), comma-separated;
// TestHTTPContract_R_N7_ItemsSpeakTheConsumerContractV2 fixes what that is.
func items(t *testing.T, zone *time.Location, stored ...[]byte) string {
	t.Helper()
	if zone == nil {
		zone = time.UTC
	}
	var buf bytes.Buffer
	for i, s := range stored {
		if i > 0 {
			buf.WriteByte(',')
		}
		require.NoError(t, appendItem(&buf, s, apiV2, zone))
	}
	return buf.String()
}

// R-E2, US-12
func TestHandler_R_E2_AllFlights(t *testing.T) {
	t.Parallel()
	rdb, prefix := liveRedis(t)
	b := setup(t, rdb, prefix)
	storetest.Complete(t, b.store)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	rec := b.get("/all/flights")
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"count":0,"flights":[]}`, rec.Body.String())

	_, err := b.store.Apply(ctx, []store.Update{
		{FLID: 1000, Version: 1, Value: doc(1000)}, {FLID: 2, Version: 1, Value: doc(2)},
		{FLID: 30, Version: 1, Value: doc(30)}, {FLID: 5, Version: 1, Value: doc(5)}, {FLID: 5, Version: 2},
	})
	require.NoError(t, err)
	rec = b.get("/all/flights")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.JSONEq(t, `{"count":3,"flights":[`+items(t, nil, doc(2), doc(30), doc(1000))+`]}`, rec.Body.String())
}

func TestHandler_FlightByFLID(t *testing.T) {
	t.Parallel()
	rdb, prefix := liveRedis(t)
	b := setup(t, rdb, prefix)
	storetest.Complete(t, b.store)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.store.Apply(ctx, []store.Update{{FLID: 7, Version: 1, Value: doc(7)}})
	require.NoError(t, err)
	tests := []struct {
		path      string
		code      int
		wantBody  string
		wantError string
	}{
		{path: "/flights/7", code: http.StatusOK, wantBody: items(t, nil, doc(7))},
		{path: "/flights/7?v=1", code: http.StatusOK, wantBody: string(doc(7))},
		{path: "/flights/8", code: http.StatusNotFound, wantError: "flight_not_found"},
		{path: "/flights/x7", code: http.StatusBadRequest, wantError: "invalid_flid"},
		{path: "/flights/-7", code: http.StatusBadRequest, wantError: "invalid_flid"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			rec := b.get(tc.path)
			require.Equal(t, tc.code, rec.Code)
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			if tc.wantBody != "" {
				require.JSONEq(t, tc.wantBody, rec.Body.String())
				return
			}
			var e errorResponse
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
			require.Equal(t, tc.wantError, e.Error)
			require.NotEmpty(t, e.Message)
		})
	}
}

// R-E2, US-12: Redis unreachable is 503 with a JSON error, never an empty
// list.
//
// Validation 001§6 INV-24 "同源读取与异常".
func TestHandler_R_E2_RedisDownIs503(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	b := setup(t, rdb, "msgx_t_down:")
	for _, path := range []string{"/all/flights", "/flights/1"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			rec := b.get(path)
			require.Equal(t, http.StatusServiceUnavailable, rec.Code)
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			require.NotEmpty(t, rec.Header().Get("Retry-After"))
			require.JSONEq(t, `{"error":"projection_unavailable","message":"the flight projection cannot be read from Redis right now; retry later (the data is not lost)"}`, rec.Body.String())
		})
	}
}

// R-H5: while Redis does not hold the whole projection (lost, partly
// lost, never built), both routes answer 503 "projection_rebuilding" and
// never an empty or partial list, nor a 404 for a flight that may only
// have been lost.
func TestHandler_R_H5_IncompleteProjectionIs503NeverPartial(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		lose func(t *testing.T, b *testBundle, rdb *redis.Client, prefix string)
	}{
		{name: "NeverBuilt", lose: func(*testing.T, *testBundle, *redis.Client, string) {}},
		{name: "EverythingDeleted", lose: func(t *testing.T, _ *testBundle, rdb *redis.Client, prefix string) {
			require.NoError(t, rdb.Del(context.Background(), prefix+"flights", prefix+"flight-versions").Err())
		}},
		{name: "VersionsHashLost", lose: func(t *testing.T, _ *testBundle, rdb *redis.Client, prefix string) {
			require.NoError(t, rdb.Del(context.Background(), prefix+"flight-versions").Err())
		}},
		{name: "FlightsHashLost", lose: func(t *testing.T, _ *testBundle, rdb *redis.Client, prefix string) {
			require.NoError(t, rdb.Del(context.Background(), prefix+"flights").Err())
		}},
		{name: "OneDocumentLost", lose: func(t *testing.T, _ *testBundle, rdb *redis.Client, prefix string) {
			require.NoError(t, rdb.HDel(context.Background(), prefix+"flights", "2").Err())
		}},
		{name: "WrittenAgainAfterTheLoss", lose: func(t *testing.T, b *testBundle, rdb *redis.Client, prefix string) {
			require.NoError(t, rdb.Del(context.Background(), prefix+"flights", prefix+"flight-versions").Err())
			// The consumer goes on writing into the emptied Redis: one
			// flight of three is not the projection.
			_, err := b.store.Apply(context.Background(), []store.Update{{FLID: 30, Version: 2, Value: doc(30)}})
			require.NoError(t, err)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb, prefix := liveRedis(t)
			b := setup(t, rdb, prefix)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := b.store.Apply(ctx, []store.Update{
				{FLID: 2, Version: 1, Value: doc(2)}, {FLID: 30, Version: 1, Value: doc(30)}, {FLID: 7, Version: 1, Value: doc(7)},
			})
			require.NoError(t, err)
			if tc.name != "NeverBuilt" {
				storetest.Complete(t, b.store)
				require.Equal(t, http.StatusOK, b.get("/all/flights").Code)
			}
			tc.lose(t, b, rdb, prefix)
			for _, path := range []string{"/all/flights", "/flights/2", "/flights/7", "/flights/8"} {
				rec := b.get(path)
				require.Equal(t, http.StatusServiceUnavailable, rec.Code, path)
				require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
				require.NotEmpty(t, rec.Header().Get("Retry-After"))
				var e errorResponse
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
				require.Equal(t, "projection_rebuilding", e.Error, path)
				require.Contains(t, e.Message, "rebuilding it from PostgreSQL")
			}
		})
	}
}

// fakeReader is a Reader whose answers the test sets: a complete
// projection of docs (FLIDs 1, 2, ...) or err.
type fakeReader struct {
	docs [][]byte
	err  error
}

func (f fakeReader) List(context.Context) (store.Listing, error) {
	if f.err != nil {
		return store.Listing{}, f.err
	}
	l := store.Listing{Docs: int64(len(f.docs))}
	for i := range f.docs {
		l.FLIDs = append(l.FLIDs, int64(i+1))
	}
	return l, nil
}

func (f fakeReader) Page(_ context.Context, _ store.Listing, flids []int64) ([][]byte, error) {
	out := make([][]byte, len(flids))
	for i, flid := range flids {
		out[i] = f.docs[flid-1]
	}
	return out, nil
}

func (f fakeReader) VersionsOf(_ context.Context, flids []int64) ([]int64, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := make([]int64, len(flids))
	for i := range out {
		out[i] = 1
	}
	return out, nil
}

func (f fakeReader) Get(context.Context, int64) (json.RawMessage, error) {
	if f.err != nil {
		return nil, f.err
	}
	return nil, store.ErrNotFound
}

func TestHandler_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reader    fakeReader
		code      int
		wantError string
	}{
		{
			name:      "TimeoutIsUnavailable",
			reader:    fakeReader{err: fmt.Errorf("reading: %w", context.DeadlineExceeded)},
			code:      http.StatusServiceUnavailable,
			wantError: "projection_unavailable",
		},
		{
			name:      "AnyReadErrorIsUnavailable",
			reader:    fakeReader{err: errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")},
			code:      http.StatusServiceUnavailable,
			wantError: "projection_unavailable",
		},
		{
			name:      "CorruptStoredDocumentIs500NotTruncated200",
			reader:    fakeReader{docs: [][]byte{[]byte(`{"flid":1}`), []byte(`{"broken`)}},
			code:      http.StatusInternalServerError,
			wantError: "internal",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mux := http.NewServeMux()
			New(tc.reader, logging.Discard(), Options{Timeout: time.Second}).Register(mux)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/all/flights", nil))
			require.Equal(t, tc.code, rec.Code)
			var e errorResponse
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
			require.Equal(t, tc.wantError, e.Error)
		})
	}
}

func TestHandler_OnlyGET(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, "unused:")
	rec := httptest.NewRecorder()
	b.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/all/flights", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}
