package compat_test

import (
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/ingest/internal/compat"
	"msgexchange/services/internal/openapi/openapitest"
)

// TestHTTPContract_R_N7_CompatEntryMatchesTheOpenAPIDocument: the compat
// entry's answers — accepted, a refused media type, an empty body, a body
// over the limit, the mailbox down — are what the OpenAPI document of the
// HTTP interface says.
func TestHTTPContract_R_N7_CompatEntryMatchesTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	v := openapitest.New(t)
	b := setup(t, func(c *compat.Config) { c.MaxBody = 256 })
	closed, err := sql.Open("mysql", b.mb.DSN)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	down := b.newHandler(t, compat.Config{MaxBody: 1 << 20, ValidStatus: "VALID"}, closed)

	for _, tc := range []struct {
		name        string
		h           http.Handler
		contentType string
		body        string
		code        int
	}{
		{"Accepted", b.handler, "text/xml", sample, http.StatusOK},
		{"AcceptedGBK", b.handler, "text/plain; charset=GBK", sample, http.StatusOK},
		{"MediaType", b.handler, "application/json", sample, http.StatusUnsupportedMediaType},
		{"Empty", b.handler, "text/xml", " ", http.StatusBadRequest},
		{"TooLarge", b.handler, "text/xml", strings.Repeat("x", 300), http.StatusRequestEntityTooLarge},
		{"MailboxDown", down, "application/xml", sample, http.StatusServiceUnavailable},
	} {
		req := httptest.NewRequest(http.MethodPost, compat.Path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, req)
		require.Equal(t, tc.code, rec.Code, "%s: %s", tc.name, rec.Body.String())
		// The validator looks at the request too.
		req.Body = io.NopCloser(strings.NewReader(tc.body))
		v.Recorded(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
	}
}
