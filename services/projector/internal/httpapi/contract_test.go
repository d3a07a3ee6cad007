package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"msgexchange/libs/logging"
	"msgexchange/services/internal/contract"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/openapi"
	"msgexchange/services/internal/openapi/openapitest"
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

func send(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, body
}

// TestHTTPContract_R_N7_ResponsesMatchTheOpenAPIDocument sends every kind
// of request the flight routes answer — the list, filtered, in either
// item version, a bad filter and a bad version, one flight in either
// version, a missing and a malformed FLID, an unknown parameter, the
// document itself, and a projection that cannot be read — and validates
// each response (status, headers, body) against the OpenAPI 3.1 document
// with libopenapi-validator: the document says what the handlers do.
func TestHTTPContract_R_N7_ResponsesMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	v := openapitest.New(t)
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
		{base + "/all/flights?v=2", http.StatusOK},
		{base + "/all/flights?v=1", http.StatusOK},
		{base + "/all/flights?day=2026-12-01&movement=A", http.StatusOK},
		{base + "/all/flights?day=2026-12-01&movement=A&v=1", http.StatusOK},
		{base + "/all/flights?movment=A", http.StatusBadRequest},
		{base + "/all/flights?v=3", http.StatusBadRequest},
		{base + "/flights/2", http.StatusOK},
		{base + "/flights/2?v=1", http.StatusOK},
		{base + "/flights/2?v=0", http.StatusBadRequest},
		{base + "/flights/2?version=1", http.StatusBadRequest},
		{base + "/flights/99", http.StatusNotFound},
		{base + "/flights/abc", http.StatusBadRequest},
		{base + openapi.Path, http.StatusOK},
		{broken + "/all/flights", http.StatusServiceUnavailable},
		{broken + "/flights/2", http.StatusServiceUnavailable},
	} {
		req, err := http.NewRequest(http.MethodGet, tc.url, nil)
		require.NoError(t, err)
		resp, body := send(t, req)
		require.Equal(t, tc.code, resp.StatusCode, "%s: %s", tc.url, body)
		v.Response(t, req, resp, body)
	}

	// The document served is the one committed.
	resp, body := send(t, must(http.NewRequest(http.MethodGet, base+openapi.Path, nil)))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, openapi.Document, body)
}

// TestHTTPContract_R_N7_ItemsSpeakTheConsumerContractV2: by default an
// item is named as version 2 of the Kafka consumer contract — it equals
// the schd state the contract's encoder writes for the same flight and
// version, less what the projection does not keep (event_type,
// occurred_at, the source's META beyond msg_id) — and carries no
// deprecation headers; with v=1 the item is the stored flight-state
// document as before, and the answer announces the deprecation
// (Deprecation, Sunset, Link to the successor). A flight no message
// caused has no source.
func TestHTTPContract_R_N7_ItemsSpeakTheConsumerContractV2(t *testing.T) {
	t.Parallel()
	rdb, prefix := liveRedis(t)
	st := store.New(rdb, prefix)
	storetest.Complete(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored := []byte(`{"schema":1,"flid":15,"version":3,"state":"ACTIVE","operation_day":"2021-01-23","msg_id":42,` +
		`"doc":{"FLID":"15","FLNO":"YG9015","MVIN":"A","SODT":"23JAN210535","GTDT":[{"@GTNO":"1","PGOT":"23JAN210400"}],"RMRK":"<b>23JAN210535</b>"}}`)
	noSource := []byte(`{"schema":1,"flid":16,"version":1,"state":"ACTIVE","msg_id":0,"doc":{"FLID":"16","SODT":"23JAN211200"}}`)
	_, err := st.Apply(ctx, []store.Update{{FLID: 15, Version: 3, Value: stored}, {FLID: 16, Version: 1, Value: noSource}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	New(st, logging.Discard(), Options{Zone: shanghai}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	want := `{"schema_version":2,"event_id":"flight-15-v3","flid":15,"state_version":3,"operation_day":"2021-01-23",` +
		`"source":{"msg_id":42},"flight":{"FLID":"15","FLNO":"YG9015","MVIN":"A","SODT":"23JAN210535",` +
		`"GTDT":[{"@GTNO":"1","PGOT":"23JAN210400"}],"RMRK":"\u003cb\u003e23JAN210535\u003c/b\u003e"},` +
		`"times":{"/GTDT/0/PGOT":"2021-01-23T04:00:00+08:00","/SODT":"2021-01-23T05:35:00+08:00"}}`
	wantNoSource := `{"schema_version":2,"event_id":"flight-16-v1","flid":16,"state_version":1,` +
		`"flight":{"FLID":"16","SODT":"23JAN211200"},"times":{"/SODT":"2021-01-23T12:00:00+08:00"}}`
	for _, path := range []string{"/flights/15", "/flights/15?v=2"} {
		resp, body := send(t, must(http.NewRequest(http.MethodGet, srv.URL+path, nil)))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, want+"\n", string(body), path)
		for _, h := range []string{"Deprecation", "Sunset", "Link"} {
			require.Empty(t, resp.Header.Values(h), "%s: version 2 is not deprecated", path)
		}
	}
	resp, body := send(t, must(http.NewRequest(http.MethodGet, srv.URL+"/all/flights", nil)))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `{"count":2,"flights":[`+want+`,`+wantNoSource+`]}`+"\n", string(body))

	// The same names, types and values as the schd record of this version.
	var doc flight.Doc
	require.NoError(t, json.Unmarshal([]byte(`{"FLID":"15","FLNO":"YG9015","MVIN":"A","SODT":"23JAN210535","GTDT":[{"@GTNO":"1","PGOT":"23JAN210400"}],"RMRK":"<b>23JAN210535</b>"}`), &doc))
	schd, err := contract.Encoder{Zone: shanghai}.Schd(contract.Change{FLID: 15, StateVersion: 3, EventType: contract.EventUpdated,
		OperationDay: "2021-01-23", Source: &contract.Source{MsgID: 42, Type: "FLOP", Subtype: "STND", Sender: "AODB", Seqn: "1"},
		OccurredAt: time.Now(), Flight: doc})
	require.NoError(t, err)
	var fromKafka, fromHTTP map[string]any
	require.NoError(t, json.Unmarshal(schd.Value, &fromKafka))
	require.NoError(t, json.Unmarshal([]byte(want), &fromHTTP))
	delete(fromKafka, "event_type")
	delete(fromKafka, "occurred_at")
	fromKafka["source"] = map[string]any{"msg_id": fromKafka["source"].(map[string]any)["msg_id"]}
	require.Equal(t, fromKafka, fromHTTP)

	// Version 1: the stored document (HTML-escaped as encoding/json
	// writes it), deprecated.
	for _, tc := range []struct{ path, body, successor string }{
		{"/flights/15?v=1", string(stored) + "\n", "/flights/15"},
		{"/all/flights?movement=A&v=1", `{"count":1,"flights":[` + string(stored) + `]}` + "\n", "/all/flights?movement=A"},
	} {
		resp, body := send(t, must(http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, strings.ReplaceAll(strings.ReplaceAll(tc.body, "<b>", `\u003cb\u003e`), "</b>", `\u003c/b\u003e`), string(body), tc.path)
		require.Equal(t, "@1796083200", resp.Header.Get("Deprecation"), "RFC 9745: 2026-12-01T00:00:00Z")
		require.Equal(t, "Tue, 01 Jun 2027 00:00:00 GMT", resp.Header.Get("Sunset"), "RFC 8594")
		require.ElementsMatch(t, []string{`</openapi.yaml>; rel="deprecation"; type="application/yaml"`, `<` + tc.successor + `>; rel="successor-version"`},
			resp.Header.Values("Link"), tc.path)
	}
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
