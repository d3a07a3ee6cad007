package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/logging"
	"msgexchange/services/projector/internal/store"
	"msgexchange/services/projector/internal/store/storetest"
)

// contractDoc is a stored flight with every field of the flight-state
// document.
func contractDoc(flid, version int64) []byte {
	return fmt.Appendf(nil, `{"schema":1,"flid":%d,"version":%d,"state":"ACTIVE","operation_day":"2026-12-01","msg_id":%d,"doc":{"FLID":"%d","FLNO":"CA%d","MVIN":"A","SODT":"01DEC260930","RMRK":"%s"}}`,
		flid, version, 100+flid, flid, flid, bytes.Repeat([]byte("x"), 64))
}

// contractServer serves the routes of a Handler on r over real HTTP (the
// compression and the streamed list are only visible there).
func contractServer(t *testing.T, r Reader) string {
	t.Helper()
	mux := http.NewServeMux()
	New(r, logging.Discard(), Options{Timeout: 5 * time.Second, Age: func() (time.Duration, bool) { return 3 * time.Second, true }}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// openAPIValidator loads the committed OpenAPI document, which must itself
// be a valid OpenAPI 3.1 document.
func openAPIValidator(t *testing.T) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(OpenAPI)
	require.NoError(t, err)
	require.Equal(t, "3.1.0", doc.GetVersion())
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	ok, verrs := v.ValidateDocument()
	require.True(t, ok, "the OpenAPI document is not valid: %v", verrs)
	return v
}

func send(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	// The validator reads the body again.
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, body
}

// TestHTTPContract_R_N7_ResponsesMatchTheOpenAPIDocument sends every kind
// of request the API answers — the list, filtered, a bad filter, one
// flight, a missing and a malformed FLID, the document itself, and a
// projection that cannot be read — and validates each response (status,
// headers, body) against the OpenAPI 3.1 document with
// libopenapi-validator: the document says what the handlers do.
func TestHTTPContract_R_N7_ResponsesMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	v := openAPIValidator(t)
	rdb, prefix := liveRedis(t)
	st := store.New(rdb, prefix)
	storetest.Complete(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := st.Apply(ctx, []store.Update{{FLID: 2, Version: 3, Value: contractDoc(2, 3)}, {FLID: 7, Version: 1, Value: contractDoc(7, 1)}})
	require.NoError(t, err)
	base := contractServer(t, st)
	broken := contractServer(t, fakeReader{err: errors.New("connection refused")})

	for _, tc := range []struct {
		url  string
		code int
	}{
		{base + "/all/flights", http.StatusOK},
		{base + "/all/flights?day=2026-12-01&movement=A", http.StatusOK},
		{base + "/all/flights?movment=A", http.StatusBadRequest},
		{base + "/flights/2", http.StatusOK},
		{base + "/flights/99", http.StatusNotFound},
		{base + "/flights/abc", http.StatusBadRequest},
		{base + OpenAPIPath, http.StatusOK},
		{broken + "/all/flights", http.StatusServiceUnavailable},
		{broken + "/flights/2", http.StatusServiceUnavailable},
	} {
		req, err := http.NewRequest(http.MethodGet, tc.url, nil)
		require.NoError(t, err)
		resp, body := send(t, req)
		require.Equal(t, tc.code, resp.StatusCode, "%s: %s", tc.url, body)
		ok, errs := v.ValidateHttpResponse(req, resp)
		require.True(t, ok, "%s: the response does not match the OpenAPI document: %v\n%s", tc.url, errs, body)
	}

	// The document served is the one committed.
	resp, body := send(t, must(http.NewRequest(http.MethodGet, base+OpenAPIPath, nil)))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	committed, err := os.ReadFile(filepath.Join("openapi.yaml"))
	require.NoError(t, err)
	require.Equal(t, committed, body)
}

// TestHTTPContract_R_N7_ETagAndIfNoneMatch: the list and a flight carry a
// weak ETag; sent back in If-None-Match it gets 304 without a body while
// nothing changed, and a new version of a flight, a new flight or a
// deletion changes the tag (a 200 with the new state); a filter has its
// own tag.
func TestHTTPContract_R_N7_ETagAndIfNoneMatch(t *testing.T) {
	t.Parallel()
	rdb, prefix := liveRedis(t)
	st := store.New(rdb, prefix)
	storetest.Complete(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	apply := func(u ...store.Update) {
		t.Helper()
		_, err := st.Apply(ctx, u)
		require.NoError(t, err)
	}
	apply(store.Update{FLID: 2, Version: 1, Value: contractDoc(2, 1)}, store.Update{FLID: 7, Version: 1, Value: contractDoc(7, 1)})
	base := contractServer(t, st)
	get := func(path, inm string) (*http.Response, []byte) {
		t.Helper()
		req := must(http.NewRequest(http.MethodGet, base+path, nil))
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		return send(t, req)
	}

	for _, path := range []string{"/all/flights", "/flights/2"} {
		resp, _ := get(path, "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		tag := resp.Header.Get("ETag")
		require.Regexp(t, `^W/"[0-9a-f]{32}"$`, tag, path)
		resp, body := get(path, tag)
		require.Equal(t, http.StatusNotModified, resp.StatusCode, path)
		require.Empty(t, body, path)
		require.Equal(t, tag, resp.Header.Get("ETag"), path)
		resp, _ = get(path, `W/"00000000000000000000000000000000", `+tag)
		require.Equal(t, http.StatusNotModified, resp.StatusCode, "%s: one of a list of tags", path)
		resp, _ = get(path, `W/"00000000000000000000000000000000"`)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: another tag", path)
	}

	resp, _ := get("/all/flights", "")
	list := resp.Header.Get("ETag")
	resp, _ = get("/all/flights?movement=A", "")
	require.NotEqual(t, list, resp.Header.Get("ETag"), "a filtered list has its own tag")
	resp, _ = get("/flights/2", "")
	one := resp.Header.Get("ETag")

	for _, tc := range []struct {
		name   string
		change store.Update
	}{
		{"NewVersion", store.Update{FLID: 2, Version: 2, Value: contractDoc(2, 2)}},
		{"NewFlight", store.Update{FLID: 9, Version: 1, Value: contractDoc(9, 1)}},
		{"Deletion", store.Update{FLID: 9, Version: 2}},
	} {
		name := tc.name
		apply(tc.change)
		resp, body := get("/all/flights", list)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: the list changed", name)
		require.NotEmpty(t, body)
		require.NotEqual(t, list, resp.Header.Get("ETag"), name)
		list = resp.Header.Get("ETag")
	}
	resp, _ = get("/flights/2", one)
	require.Equal(t, http.StatusOK, resp.StatusCode, "flight 2 has a new version")
	require.NotEqual(t, one, resp.Header.Get("ETag"))
}

// TestHTTPContract_R_N7_GzipOnlyWhenAccepted: with Accept-Encoding gzip
// the list (streamed, 401 flights over several pages) and a flight of
// more than 1 KiB come
// gzip-compressed and decompress to exactly the uncompressed body; without
// it they are sent as they are. Both say Vary: Accept-Encoding.
func TestHTTPContract_R_N7_GzipOnlyWhenAccepted(t *testing.T) {
	t.Parallel()
	rdb, prefix := liveRedis(t)
	st := store.New(rdb, prefix)
	storetest.Complete(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var us []store.Update
	for flid := int64(1); flid <= 400; flid++ {
		us = append(us, store.Update{FLID: flid, Version: 1, Value: contractDoc(flid, 1)})
	}
	// One flight above the 1 KiB below which nothing is compressed.
	us = append(us, store.Update{FLID: 1000, Version: 1, Value: fmt.Appendf(nil,
		`{"schema":1,"flid":1000,"version":1,"doc":{"FLID":"1000","RMRK":"%s"}}`, bytes.Repeat([]byte("y"), 2048))})
	_, err := st.Apply(ctx, us)
	require.NoError(t, err)
	mux := http.NewServeMux()
	New(st, logging.Discard(), Options{Timeout: 5 * time.Second, PageSize: 100}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// A transport that leaves the encoding to the test.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	t.Cleanup(client.CloseIdleConnections)

	for _, path := range []string{"/all/flights", "/flights/1000"} {
		plainReq := must(http.NewRequest(http.MethodGet, srv.URL+path, nil))
		plainResp, err := client.Do(plainReq)
		require.NoError(t, err)
		plain, err := io.ReadAll(plainResp.Body)
		require.NoError(t, err)
		require.NoError(t, plainResp.Body.Close())
		require.Empty(t, plainResp.Header.Get("Content-Encoding"), "%s: not compressed unless accepted", path)
		require.Contains(t, plainResp.Header.Values("Vary"), "Accept-Encoding", path)

		gzReq := must(http.NewRequest(http.MethodGet, srv.URL+path, nil))
		gzReq.Header.Set("Accept-Encoding", "gzip")
		gzResp, err := client.Do(gzReq)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, gzResp.StatusCode)
		require.Equal(t, "gzip", gzResp.Header.Get("Content-Encoding"), path)
		require.Equal(t, "application/json", gzResp.Header.Get("Content-Type"), path)
		zr, err := gzip.NewReader(gzResp.Body)
		require.NoError(t, err)
		unzipped, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.NoError(t, gzResp.Body.Close())
		require.Equal(t, plain, unzipped, "%s: the compressed body is the same body", path)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
