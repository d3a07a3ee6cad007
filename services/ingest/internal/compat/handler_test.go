package compat_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/simplifiedchinese"

	"msgexchange/libs/clock"
	"msgexchange/services/ingest/internal/compat"
	"msgexchange/services/ingest/internal/ingesttest"
	"msgexchange/services/ingest/internal/mailbox"
)

const sample = `<?xml version="1.0" encoding="UTF-8"?><MSG><META><SNDR>AODB</SNDR><TYPE>FLOP</TYPE><STYP>FDEL</STYP></META></MSG>`

type testBundle struct {
	mb      *ingesttest.Mailbox
	clock   *clock.Fake
	metrics *ingesttest.Metrics
	wakes   *atomic.Int64
	handler *compat.Handler
}

// setup gives each test its own mailbox database and a handler on it
// (limit 10 MiB unless tuned, all sources allowed).
func setup(t *testing.T, tune ...func(*compat.Config)) *testBundle {
	t.Helper()
	b := &testBundle{
		mb:      ingesttest.NewMailbox(t),
		clock:   clock.NewFake(time.Date(2021, 1, 23, 5, 35, 7, 0, ingesttest.Location(t))),
		metrics: ingesttest.NewMetrics(t),
		wakes:   new(atomic.Int64),
	}
	cfg := compat.Config{MaxBody: 10 << 20, ValidStatus: "VALID"}
	for _, f := range tune {
		f(&cfg)
	}
	b.handler = b.newHandler(t, cfg, b.mb.DB)
	return b
}

func (b *testBundle) newHandler(t *testing.T, cfg compat.Config, db *sql.DB) *compat.Handler {
	t.Helper()
	h, err := compat.New(cfg, mailbox.New(db, ingesttest.Location(t), "VALID"), b.clock,
		func() { b.wakes.Add(1) }, b.metrics.Meter, ingesttest.Logger(t))
	require.NoError(t, err)
	return h
}

func post(h http.Handler, contentType string, body io.Reader) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, compat.Path, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// requireAccepted checks the success answer: 200, text/plain, the decimal
// ID and nothing else. It returns the ID.
func requireAccepted(t *testing.T, rec *httptest.ResponseRecorder) int64 {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	id, err := strconv.ParseInt(rec.Body.String(), 10, 64)
	require.NoError(t, err, "the body is the ID and nothing else: %q", rec.Body.String())
	require.Positive(t, id)
	return id
}

// requireFailure checks a failure answer: the status, a JSON body with the
// code and a message, and no ID anywhere.
func requireFailure(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, code, body["error"])
	require.NotEmpty(t, body["message"])
	require.Len(t, body, 2, "only error and message: never an ID")
	_, err := strconv.ParseInt(strings.TrimSpace(rec.Body.String()), 10, 64)
	require.Error(t, err)
}

type storedRow struct {
	msg, received, status string
	processed, others     sql.NullString
}

func (b *testBundle) row(t *testing.T, id int64) storedRow {
	t.Helper()
	var r storedRow
	require.NoError(t, b.mb.DB.QueryRowContext(context.Background(), `SELECT CMINMSGS_CLOB_MSG,
		DATE_FORMAT(CMINMSGS_DATE_RECEIVED, '%Y-%m-%d %H:%i:%s'), CMINMSGS_STATUS, CMINMSGS_DATE_PROCESSED,
		CONCAT_WS(',', CMINMSGS_SUBSYSTEM_NAME, CMINMSGS_SUBSYSTEM_SEQUENCE, CMINMSGS_SUBSYSTEM_DATE_SENT,
			CMINMSGS_SUBSYSTEM_SUBTYPE, CMINMSGS_SUBSYSTEM_TYPE)
		FROM CMINMSGS WHERE CMINMSGS_ID = ?`, id).Scan(&r.msg, &r.received, &r.status, &r.processed, &r.others))
	return r
}

// R-A7 (C-28, US-02): the three media types are accepted; the row holds
// the message, airport-local receive time and VALID, nothing else; the
// answer is the row's ID; the scanner is woken once per insert.
//
// Also names G-COMPAT-HTTP, US-02, C-28.
func TestCompat_R_A7_AcceptsTheThreeMediaTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, ct := range []string{"text/xml", "application/xml", "text/plain", "TEXT/XML; charset=utf-8"} {
		t.Run(ct, func(t *testing.T) {
			id := requireAccepted(t, post(b.handler, ct, strings.NewReader(sample)))
			r := b.row(t, id)
			require.Equal(t, sample, r.msg)
			require.Equal(t, "2021-01-23 05:35:07", r.received, "airport local time of the injected clock")
			require.Equal(t, "VALID", r.status)
			require.False(t, r.processed.Valid, "never a marker")
			require.Equal(t, "", r.others.String, "other columns stay NULL")
			require.EqualValues(t, i+1, b.wakes.Load())
		})
	}
	require.EqualValues(t, 4, b.metrics.Counter(t, "msgx_ingest_compat_requests_total"))
}

// R-A7: other media types and a missing Content-Type are 415; an unknown
// charset is 415 unsupported_charset. Nothing is stored, nobody woken.
func TestCompat_R_A7_RejectsOtherMediaTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct{ name, ct, code string }{
		{"JSON", "application/json", "unsupported_media_type"},
		{"OctetStream", "application/octet-stream", "unsupported_media_type"},
		{"Missing", "", "unsupported_media_type"},
		{"Malformed", "text/xml;;;=", "unsupported_media_type"},
		{"UnknownCharset", "text/xml; charset=x-unknown-charset", "unsupported_charset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireFailure(t, post(b.handler, tc.ct, strings.NewReader(sample)), http.StatusUnsupportedMediaType, tc.code)
		})
	}
	require.Zero(t, b.mb.Count(t, "1=1"))
	require.Zero(t, b.wakes.Load())
}

// R-A7: a body over compat.max-body is 413, whether its length is declared
// or streamed; a body of exactly the limit is accepted.
func TestCompat_R_A7_BodyOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *compat.Config) { c.MaxBody = 64 })
	exact := "<MSG>" + strings.Repeat("x", 64-len("<MSG></MSG>")) + "</MSG>"
	requireAccepted(t, post(b.handler, "text/xml", strings.NewReader(exact)))

	over := exact + " "
	requireFailure(t, post(b.handler, "text/xml", strings.NewReader(over)), http.StatusRequestEntityTooLarge, "body_too_large")

	req := httptest.NewRequest(http.MethodPost, compat.Path, iotest.OneByteReader(strings.NewReader(over)))
	req.ContentLength = -1 // chunked: the limit is found while reading
	req.Header.Set("Content-Type", "text/xml")
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	requireFailure(t, rec, http.StatusRequestEntityTooLarge, "body_too_large")
	require.Equal(t, 1, b.mb.Count(t, "1=1"))
}

// R-A7: an empty or whitespace-only body is 400.
func TestCompat_R_A7_EmptyBodyIs400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, body := range map[string]string{"Empty": "", "Whitespace": " \r\n\t ", "IdeographicSpace": "\u3000"} {
		t.Run(name, func(t *testing.T) {
			requireFailure(t, post(b.handler, "text/xml", strings.NewReader(body)), http.StatusBadRequest, "empty_body")
		})
	}
	require.Zero(t, b.mb.Count(t, "1=1"))
}

// R-A7: GBK and GB18030 bodies are stored as the same Chinese text in UTF-8.
func TestCompat_R_A7_ConvertsChineseCharsetsToUTF8(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const text = `<MSG><FLOP><REMC>航班延误，旅客请到三号登机口</REMC></FLOP></MSG>`
	gbk, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(text))
	require.NoError(t, err)
	gb18030, err := simplifiedchinese.GB18030.NewEncoder().Bytes([]byte(text + "𠀀"))
	require.NoError(t, err)
	tests := []struct {
		name, ct string
		body     []byte
		want     string
	}{
		{"GBK", "text/xml; charset=GBK", gbk, text},
		{"GB2312", "text/plain; charset=gb2312", gbk, text},
		{"GB18030", "application/xml; charset=GB18030", gb18030, text + "𠀀"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := requireAccepted(t, post(b.handler, tc.ct, bytes.NewReader(tc.body)))
			require.Equal(t, tc.want, b.row(t, id).msg)
		})
	}
}

// R-A7: bytes invalid in the declared or default charset are 400.
func TestCompat_R_A7_InvalidBytesAre400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireFailure(t, post(b.handler, "text/xml", bytes.NewReader([]byte{'<', 0xFF, '>'})), http.StatusBadRequest, "invalid_encoding")
	requireFailure(t, post(b.handler, "text/xml; charset=GBK", bytes.NewReader([]byte{'<', 0x81, '>'})), http.StatusBadRequest, "invalid_encoding")
	require.Zero(t, b.mb.Count(t, "1=1"))
}

// R-A7: with the mailbox down (closed pool, or the table gone) the answer
// is 503 JSON, no ID, and the scanner is not woken.
func TestCompat_R_A7_MailboxDownIs503(t *testing.T) {
	t.Parallel()
	b := setup(t)
	closed, err := sql.Open("mysql", b.mb.DSN)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	requireFailure(t, post(b.newHandler(t, compat.Config{MaxBody: 1 << 20, ValidStatus: "VALID"}, closed), "text/xml", strings.NewReader(sample)),
		http.StatusServiceUnavailable, "mailbox_unavailable")

	b.mb.Exec(t, "DROP TABLE CMINMSGS")
	rec := post(b.handler, "text/xml", strings.NewReader(sample))
	requireFailure(t, rec, http.StatusServiceUnavailable, "mailbox_unavailable")
	require.NotContains(t, rec.Body.String(), "CMINMSGS", "database details stay in the log")
	require.Zero(t, b.wakes.Load())
}

// R-F3: with compat.allowed-networks set, other sources get 403 JSON.
func TestCompat_R_F3_AllowedNetworks(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *compat.Config) {
		c.AllowedNetworks = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("2001:db8::/32")}
	})
	tests := []struct {
		remote string
		ok     bool
	}{
		{"10.1.2.3:4567", true},
		{"[::ffff:10.1.2.3]:4567", true},
		{"[2001:db8::1]:80", true},
		{"10.2.0.1:4567", false},
		{"127.0.0.1:4567", false},
		{"not-an-address", false},
	}
	for _, tc := range tests {
		t.Run(tc.remote, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, compat.Path, strings.NewReader(sample))
			req.RemoteAddr = tc.remote
			req.Header.Set("Content-Type", "text/xml")
			req.Header.Set("X-Forwarded-For", "10.1.2.3")
			rec := httptest.NewRecorder()
			b.handler.ServeHTTP(rec, req)
			if tc.ok {
				requireAccepted(t, rec)
			} else {
				requireFailure(t, rec, http.StatusForbidden, "forbidden")
			}
		})
	}
}

// R-A7: only POST; other methods get 405 JSON with Allow.
func TestCompat_R_A7_OnlyPost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := httptest.NewRequest(http.MethodGet, compat.Path, nil)
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	requireFailure(t, rec, http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, http.MethodPost, rec.Header().Get("Allow"))
}

// R-A7: through a real HTTP server, a 10 MiB message (the default limit)
// is stored whole.
func TestCompat_R_A7_LargeMessageOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(b.handler)
	t.Cleanup(srv.Close)
	body := "<MSG>" + strings.Repeat("x", 10<<20-len("<MSG></MSG>")) + "</MSG>"
	resp, err := srv.Client().Post(srv.URL+compat.Path, "text/xml", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	id, err := strconv.ParseInt(string(raw), 10, 64)
	require.NoError(t, err)
	require.Equal(t, 1, b.mb.Count(t, "CMINMSGS_ID = "+strconv.FormatInt(id, 10)+" AND LENGTH(CMINMSGS_CLOB_MSG) = "+strconv.Itoa(len(body))))
}
