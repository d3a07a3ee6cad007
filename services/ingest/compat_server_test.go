package ingest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/ingest"
)

// TestService_R_H10_CompatOnItsOwnListener: with compat.addr the entry is
// served by a listener of its own that serves nothing else; without it no
// compat server runs.
func TestService_R_H10_CompatOnItsOwnListener(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.Compat.Addr = "127.0.0.1:0"
	s, err := ingest.New(b.cfg, b.deps)
	require.NoError(t, err)
	svcs := s.Services()
	require.Len(t, svcs, 2)
	require.Equal(t, ingest.CompatServiceName, svcs[1].Name())
	require.Empty(t, s.CompatAddr(), "not listening before the start")
	start(t, s)
	addr := s.CompatAddr()
	require.NotEmpty(t, addr)

	ctx, cancel := context.WithTimeout(context.Background(), awaitTimeout)
	defer cancel()
	send := func(method, path, contentType, body string, header http.Header) (int, string) {
		req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
		require.NoError(t, err)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(data)
	}
	code, body := send(http.MethodPost, "/cminmsgs/send", "text/xml", "<MSG>compat</MSG>", nil)
	require.Equal(t, http.StatusOK, code, body)
	for _, path := range []string{"/metrics", "/all/flights", "/board", "/healthz"} {
		code, _ := send(http.MethodGet, path, "", "", nil)
		require.Equal(t, http.StatusNotFound, code, "%s is not served on the compat listener", path)
	}
	code, body = send(http.MethodPost, "/cminmsgs/send", "text/plain", "<MSG>x</MSG>", http.Header{"Origin": {"https://evil.example"}})
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, `"cross_site"`)

	b.cfg.Compat.Addr = ""
	off, err := ingest.New(b.cfg, b.deps)
	require.NoError(t, err)
	require.Len(t, off.Services(), 1, "no compat server without compat.addr")
	require.Empty(t, off.CompatAddr())
}
