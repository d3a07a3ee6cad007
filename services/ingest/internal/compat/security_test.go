package compat_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/ingest/internal/compat"
)

// request builds a POST of sample from remote with the given headers.
func request(remote string, headers map[string][]string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, compat.Path, strings.NewReader(sample))
	req.RemoteAddr = remote
	req.Header.Set("Content-Type", "text/xml")
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return req
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestCompat_R_H10_CrossSiteBrowserPostRefused: the attack — a web page
// posting a flight deletion as text/plain from a foreign Origin, which a
// browser sends without a preflight — is 403 and stores nothing; so is
// any request a browser marks as coming from another site. Programs send
// neither header and pass.
func TestCompat_R_H10_CrossSiteBrowserPostRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name    string
		headers map[string][]string
	}{
		{"ForeignOrigin", map[string][]string{"Origin": {"https://evil.example"}}},
		{"NullOrigin", map[string][]string{"Origin": {"null"}}},
		{"FetchCrossSite", map[string][]string{"Sec-Fetch-Site": {"cross-site"}}},
		{"FetchSameSite", map[string][]string{"Sec-Fetch-Site": {"same-site"}}},
		{"BothHeaders", map[string][]string{"Origin": {"http://10.0.0.9:8080"}, "Sec-Fetch-Site": {"same-site"}, "Sec-Fetch-Mode": {"no-cors"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, compat.Path, strings.NewReader(`<MSG><META><TYPE>FLOP</TYPE><STYP>FDEL</STYP></META></MSG>`))
			req.Header.Set("Content-Type", "text/plain")
			for k, vs := range tc.headers {
				req.Header[k] = vs
			}
			requireFailure(t, serve(b.handler, req), http.StatusForbidden, "cross_site")
		})
	}
	require.Zero(t, b.mb.Count(t, "1=1"), "nothing stored")

	for _, site := range []string{"none", "same-origin"} {
		requireAccepted(t, serve(b.handler, request("10.0.0.1:5000", map[string][]string{"Sec-Fetch-Site": {site}})))
	}
	requireAccepted(t, serve(b.handler, request("10.0.0.1:5000", nil)))
}

// TestCompat_R_H10_BearerToken: with a token file every request needs one
// of its tokens (401 with WWW-Authenticate otherwise); a token added to
// the file is accepted and a removed one refused without a restart.
func TestCompat_R_H10_BearerToken(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "compat-tokens")
	const first, second = "compat-token-one-0123456789abcdef", "compat-token-two-0123456789abcdef-longer"
	require.NoError(t, os.WriteFile(path, []byte(first+"\n"), 0o600))
	b := setup(t, func(c *compat.Config) { c.TokenFile = path })
	with := func(tok string) *httptest.ResponseRecorder {
		return serve(b.handler, request("10.0.0.1:5000", map[string][]string{"Authorization": {"Bearer " + tok}}))
	}

	rec := serve(b.handler, request("10.0.0.1:5000", nil))
	requireFailure(t, rec, http.StatusUnauthorized, "unauthorized")
	require.Equal(t, `Bearer realm="cminmsgs"`, rec.Header().Get("WWW-Authenticate"))
	requireFailure(t, with("wrong"), http.StatusUnauthorized, "unauthorized")
	requireFailure(t, serve(b.handler, request("10.0.0.1:5000", map[string][]string{"Authorization": {"Basic " + first}})), http.StatusUnauthorized, "unauthorized")
	requireAccepted(t, with(first))

	require.NoError(t, os.WriteFile(path, []byte("# rotation\n"+first+"\n"+second+"\n"), 0o600))
	requireAccepted(t, with(second))
	requireAccepted(t, with(first))
	require.NoError(t, os.WriteFile(path, []byte(second+"\n"), 0o600))
	requireFailure(t, with(first), http.StatusUnauthorized, "unauthorized")
	require.NoError(t, os.WriteFile(path, []byte("\n"), 0o600))
	requireAccepted(t, with(second)) // an emptied file keeps the previous tokens

	_, err := compat.New(compat.Config{MaxBody: 1, TokenFile: filepath.Join(t.TempDir(), "none")}, nil, b.clock, nil, b.metrics.Meter, nil)
	require.ErrorContains(t, err, "compat token file")
}

// TestCompat_R_H10_TrustedProxiesForwardedFor: behind a trusted proxy the
// client is the rightmost X-Forwarded-For address that is not a trusted
// proxy; from any other peer the header is ignored, and a trusted proxy's
// malformed header is refused.
func TestCompat_R_H10_TrustedProxiesForwardedFor(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *compat.Config) {
		c.AllowedNetworks = []netip.Prefix{netip.MustParsePrefix("192.168.10.0/24")}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
	})
	for _, tc := range []struct {
		name   string
		remote string
		xff    []string
		ok     bool
	}{
		{"ClientBehindProxy", "10.0.0.5:443", []string{"192.168.10.7"}, true},
		{"TwoProxies", "10.0.0.5:443", []string{"192.168.10.7, 10.0.0.6"}, true},
		{"TwoHeaderLines", "10.0.0.5:443", []string{"192.168.10.7", "10.0.0.6"}, true},
		{"ClientPrependsAnAllowedAddress", "10.0.0.5:443", []string{"192.168.10.7, 172.16.0.9"}, false},
		{"OutsideClientBehindProxy", "10.0.0.5:443", []string{"172.16.0.9"}, false},
		{"UntrustedPeerForgesHeader", "172.16.0.9:5000", []string{"192.168.10.7"}, false},
		{"AllowedPeerDirect", "192.168.10.8:5000", nil, true},
		{"AllowedPeerHeaderIgnored", "192.168.10.8:5000", []string{"172.16.0.9"}, true},
		{"ProxyWithoutHeaderIsTheClient", "10.0.0.5:443", nil, false},
		{"MalformedFromProxy", "10.0.0.5:443", []string{"192.168.10.7, not-an-ip"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(b.handler, request(tc.remote, map[string][]string{"X-Forwarded-For": tc.xff}))
			if tc.ok {
				requireAccepted(t, rec)
				return
			}
			requireFailure(t, rec, http.StatusForbidden, "forbidden")
		})
	}
}
